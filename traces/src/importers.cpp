#include "memsim/traces/importers.hpp"

#include "memsim/common/error.hpp"
#include "memsim/common/json_io.hpp"
#include "memsim/traces/compressed_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

namespace memsim {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------------------------
// DTR logs

struct DtrRecord {
  std::size_t line = 0; // 1-based line in the file
  json value;
};

class DtrLog {
public:
  explicit DtrLog(const std::filesystem::path& path) : file_(path.string())
  {
    const std::string text = read_possibly_gzipped(path);
    std::size_t line = 0;
    std::size_t begin = 0;
    while (begin < text.size()) {
      std::size_t end = text.find('\n', begin);
      if (end == std::string::npos)
        end = text.size();
      ++line;
      std::string_view content(text.data() + begin, end - begin);
      begin = end + 1;
      if (content.find_first_not_of(" \t\r") == std::string_view::npos)
        continue;
      DtrRecord record;
      record.line = line;
      try {
        record.value = json_io::parse_text(content, file_); // json_io's limits (nesting, numbers) per line
      } catch (const InputError& error) {
        std::string message = error.message();
        if (message.starts_with("invalid JSON: "))
          message = message.substr(std::string_view("invalid JSON: ").size());
        throw InputError(where(line), fmt::format("invalid JSON (truncated log?): {}", message));
      }
      if (!record.value.is_object())
        throw InputError(where(line), "expected one JSON object per line");
      records_.push_back(std::move(record));
    }
  }

  std::string where(std::size_t line) const { return fmt::format("{}:{}", file_, line); }
  const std::string& file() const { return file_; }
  const std::vector<DtrRecord>& records() const { return records_; }

  std::string instruction(const DtrRecord& record) const { return string_field(record, "INSTRUCTION"); }

  std::string string_field(const DtrRecord& record, const char* key) const
  {
    auto found = record.value.find(key);
    if (found == record.value.end())
      throw InputError(where(record.line), fmt::format("record has no '{}'", key));
    if (found->is_string())
      return found->get<std::string>();
    if (found->is_number_integer())
      return std::to_string(found->get<std::int64_t>());
    throw InputError(where(record.line), fmt::format("'{}' must be a string", key));
  }

  // The logs write numbers as strings ("MEMORY": "1728"); accept both.
  std::int64_t int_field(const DtrRecord& record, const char* key) const
  {
    auto found = record.value.find(key);
    if (found == record.value.end())
      throw InputError(where(record.line), fmt::format("record has no '{}'", key));
    if (found->is_number_integer())
      return found->get<std::int64_t>();
    if (found->is_string()) {
      const std::string text = found->get<std::string>();
      std::int64_t value = 0;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error == std::errc() && end == text.data() + text.size())
        return value;
    }
    throw InputError(where(record.line), fmt::format("'{}' must be an integer, found {}", key, found->dump()));
  }

  std::vector<std::string> names_field(const DtrRecord& record, const char* key) const
  {
    auto found = record.value.find(key);
    if (found == record.value.end() || !found->is_array())
      throw InputError(where(record.line), fmt::format("record has no '{}' list", key));
    std::vector<std::string> names;
    for (const auto& item : *found) {
      if (item.is_string())
        names.push_back(item.get<std::string>());
      else if (item.is_number_integer())
        names.push_back(std::to_string(item.get<std::int64_t>()));
      else
        throw InputError(where(record.line), fmt::format("'{}' must list tensor names, found {}", key, item.dump()));
    }
    return names;
  }

private:
  std::string file_;
  std::vector<DtrRecord> records_;
};

class DtrImporter {
public:
  explicit DtrImporter(const std::filesystem::path& path) : log_(path)
  {
    trace_.name = path.filename().string();
    for (auto suffix : {".gz", ".log", ".jsonl"})
      if (trace_.name.size() > std::string_view(suffix).size() && trace_.name.ends_with(suffix))
        trace_.name.resize(trace_.name.size() - std::string_view(suffix).size());
    trace_.source.tool = "memsim import dtr (DTR prototype log, simrd accounting)";
    trace_.source.device = "Titan V (as recorded by the DTR authors)";
    trace_.source.dtype = "fp32";
  }

  Trace run(DtrImportStats* stats)
  {
    const auto& records = log_.records();
    std::size_t index = 0;
    // simrd starts after the START annotation; logs without one start at the top.
    for (std::size_t i = 0; i < records.size(); ++i)
      if (log_.instruction(records[i]) == "ANNOTATE" && annotation(records[i]) == "START") {
        index = i + 1;
        break;
      }
    while (index < records.size())
      index = step(index);
    // Storages still referenced at the end are the iteration's outputs: they live to the last op.
    for (std::size_t s = 0; s < refs_.size(); ++s)
      if (!pinned_[s] && !released_[s] && !trace_.ops.empty())
        trace_.tensors[s].free_after = static_cast<OpId>(trace_.ops.size() - 1);
    validate_trace(trace_, log_.file());
    if (stats)
      *stats = stats_;
    return std::move(trace_);
  }

private:
  std::string annotation(const DtrRecord& record) const { return log_.string_field(record, "ANNOTATION"); }

  std::size_t storage_of(const DtrRecord& record, const std::string& name) const
  {
    auto found = handles_.find(name);
    if (found == handles_.end())
      throw InputError(log_.where(record.line), fmt::format("unknown tensor '{}'", name));
    if (released_[found->second])
      throw InputError(log_.where(record.line),
                       fmt::format("tensor '{}' is used after its storage was released", name));
    return found->second;
  }

  std::size_t new_storage(const DtrRecord& record, const std::string& name, std::int64_t bytes, TensorKind kind)
  {
    if (bytes < 0)
      throw InputError(log_.where(record.line), fmt::format("negative size {} for tensor '{}'", bytes, name));
    Tensor tensor;
    tensor.id = static_cast<TensorId>(trace_.tensors.size());
    tensor.name = name;
    tensor.bytes = static_cast<std::uint64_t>(bytes);
    tensor.kind = kind;
    trace_.tensors.push_back(tensor);
    refs_.push_back(1);
    pinned_.push_back(is_initially_resident(kind));
    released_.push_back(false);
    handles_[name] = static_cast<std::size_t>(tensor.id);
    return static_cast<std::size_t>(tensor.id);
  }

  // Drops one handle of a storage; the last one releases it after the latest op (simrd's eager eviction).
  void drop(const DtrRecord& record, std::size_t storage, const std::string& name)
  {
    if (refs_[storage] <= 0)
      throw InputError(log_.where(record.line), fmt::format("'{}' released more often than it was referenced", name));
    if (--refs_[storage] > 0 || pinned_[storage])
      return;
    released_[storage] = true;
    if (!trace_.ops.empty())
      trace_.tensors[storage].free_after = static_cast<OpId>(trace_.ops.size() - 1);
  }

  const DtrRecord& follower(std::size_t index, const char* expected, const std::string& name,
                            const DtrRecord& owner) const
  {
    const auto& records = log_.records();
    if (index >= records.size())
      throw InputError(log_.where(owner.line),
                       fmt::format("log ends before the {} line of '{}' (truncated log?)", expected, name));
    const DtrRecord& record = records[index];
    if (log_.instruction(record) != expected || log_.string_field(record, "NAME") != name)
      throw InputError(log_.where(record.line), fmt::format("expected {} of '{}' after line {}, found {}", expected,
                                                            name, owner.line, record.value.dump()));
    return record;
  }

  Op& new_op(const std::string& name, std::int64_t time_ns, const DtrRecord& record)
  {
    if (time_ns < 0)
      throw InputError(log_.where(record.line), fmt::format("negative TIME {} for '{}'", time_ns, name));
    in_backward_ = in_backward_ || name.find("backward") != std::string::npos; // simrd's rule
    Op op;
    op.id = static_cast<OpId>(trace_.ops.size());
    op.name = name;
    op.type = name;
    op.phase = in_backward_ ? Phase::backward : Phase::forward;
    op.time_s = static_cast<double>(time_ns) * 1e-9;
    stats_.total_compute_s += op.time_s;
    trace_.ops.push_back(std::move(op));
    return trace_.ops.back();
  }

  static void add_unique(std::vector<TensorId>& ids, std::size_t storage)
  {
    auto id = static_cast<TensorId>(storage);
    if (std::find(ids.begin(), ids.end(), id) == ids.end())
      ids.push_back(id);
  }

  TensorKind produced_kind() const { return in_backward_ ? TensorKind::gradient : TensorKind::activation; }

  std::size_t step(std::size_t index)
  {
    const DtrRecord& record = log_.records()[index];
    const std::string instruction = log_.instruction(record);
    if (instruction == "CONSTANT") {
      const std::string name = log_.string_field(record, "NAME");
      const DtrRecord& memory = follower(index + 1, "MEMORY", name, record);
      new_storage(memory, name, log_.int_field(memory, "MEMORY"), TensorKind::weight);
      stats_.constant_bytes += trace_.tensors.back().bytes;
      if (stats_.calls + stats_.mutates > 0)
        ++stats_.constants_after_first_call;
      return index + 2;
    }
    if (instruction == "COPY") {
      const std::string destination = log_.string_field(record, "DST");
      std::size_t storage = storage_of(record, log_.string_field(record, "SRC"));
      if (handles_.count(destination))
        throw InputError(log_.where(record.line), fmt::format("COPY to '{}', which already exists", destination));
      handles_[destination] = storage;
      ++refs_[storage];
      return index + 1;
    }
    if (instruction == "COPY_FROM") {
      const std::string destination = log_.string_field(record, "DST");
      std::size_t source = storage_of(record, log_.string_field(record, "SRC"));
      std::size_t old = storage_of(record, destination);
      ++refs_[source];
      handles_[destination] = source;
      drop(record, old, destination);
      return index + 1;
    }
    if (instruction == "RELEASE") {
      ++stats_.releases;
      const std::string name = log_.string_field(record, "NAME");
      auto found = handles_.find(name);
      if (found != handles_.end() && !released_[found->second]) // simrd ignores releases of unknown names
        drop(record, found->second, name);
      return index + 1;
    }
    if (instruction == "CALL") {
      ++stats_.calls;
      const std::string name = log_.string_field(record, "NAME");
      const auto args = log_.names_field(record, "ARGS");
      const auto results = log_.names_field(record, "RESULT");
      std::vector<std::size_t> arg_storages;
      for (const auto& arg : args)
        arg_storages.push_back(storage_of(record, arg));
      Op& op = new_op(name, log_.int_field(record, "TIME"), record);
      for (std::size_t storage : arg_storages)
        add_unique(op.inputs, storage);
      std::size_t next = index + 1;
      for (const auto& result : results) {
        const DtrRecord& memory = follower(next, "MEMORY", result, record);
        const DtrRecord& alias = follower(next + 1, "ALIAS", result, record);
        next += 2;
        if (handles_.count(result) && !released_[handles_[result]])
          throw InputError(log_.where(record.line), fmt::format("result '{}' already exists", result));
        const std::int64_t bytes = log_.int_field(memory, "MEMORY");
        if (bytes < 0)
          throw InputError(log_.where(memory.line), fmt::format("negative size {} for tensor '{}'", bytes, result));
        const std::int64_t aliased = log_.int_field(alias, "ALIAS");
        if (aliased == -1) {
          std::size_t storage = new_storage(memory, result, bytes, produced_kind());
          trace_.ops.back().outputs.push_back(static_cast<TensorId>(storage));
        } else {
          if (aliased < 0 || static_cast<std::size_t>(aliased) >= arg_storages.size())
            throw InputError(log_.where(alias.line), fmt::format("ALIAS {} of '{}' names no argument of '{}' ({} args)",
                                                                 aliased, result, name, arg_storages.size()));
          std::size_t storage = arg_storages[static_cast<std::size_t>(aliased)];
          handles_[result] = storage;
          ++refs_[storage];
        }
      }
      return next;
    }
    if (instruction == "MUTATE") {
      ++stats_.mutates;
      const std::string name = log_.string_field(record, "NAME");
      const auto args = log_.names_field(record, "ARGS");
      std::vector<std::size_t> arg_storages;
      for (const auto& arg : args)
        arg_storages.push_back(storage_of(record, arg));
      auto mutated = record.value.find("MUTATE");
      if (mutated == record.value.end() || !mutated->is_array())
        throw InputError(log_.where(record.line), "record has no 'MUTATE' list");
      Op& op = new_op(name, log_.int_field(record, "TIME"), record);
      for (std::size_t storage : arg_storages)
        add_unique(op.inputs, storage);
      const OpId op_id = op.id;
      // simrd: each mutated argument becomes a new storage of the same size; the old one loses this handle.
      for (const auto& position : *mutated) {
        if (!position.is_number_integer() || position.get<std::int64_t>() < 0 ||
            position.get<std::size_t>() >= args.size())
          throw InputError(log_.where(record.line),
                           fmt::format("MUTATE index {} names no argument of '{}'", position.dump(), name));
        const std::string& arg = args[position.get<std::size_t>()];
        std::size_t old = handles_.at(arg);
        const TensorKind kind = pinned_[old] ? TensorKind::other : produced_kind();
        std::size_t fresh = new_storage(record, arg + "$", static_cast<std::int64_t>(trace_.tensors[old].bytes), kind);
        handles_[arg] = fresh;
        trace_.ops[static_cast<std::size_t>(op_id)].outputs.push_back(static_cast<TensorId>(fresh));
        drop(record, old, arg);
      }
      return index + 1;
    }
    if (instruction == "ANNOTATE") {
      if (annotation(record) == "BACKWARD")
        in_backward_ = true;
      return index + 1;
    }
    if (instruction == "MEMORY" || instruction == "ALIAS")
      throw InputError(log_.where(record.line),
                       fmt::format("{} of '{}' does not follow a CONSTANT or CALL that creates it", instruction,
                                   log_.string_field(record, "NAME")));
    throw InputError(log_.where(record.line),
                     fmt::format("unknown instruction '{}' (valid: CONSTANT, MEMORY, COPY, COPY_FROM, RELEASE, CALL, "
                                 "MUTATE, ALIAS, ANNOTATE)",
                                 instruction));
  }

  DtrLog log_;
  Trace trace_;
  std::unordered_map<std::string, std::size_t> handles_; // tensor name -> storage (== memsim tensor id)
  std::vector<int> refs_;
  std::vector<bool> pinned_;
  std::vector<bool> released_;
  bool in_backward_ = false;
  DtrImportStats stats_;
};

// ---------------------------------------------------------------------------------------------------------------
// Checkmate graphs

std::string node_name(const json_io::Node& node, std::size_t index)
{
  if (!node.has("name"))
    return fmt::format("node{}", index);
  const json& name = node.at("name").value();
  return name.is_string() ? name.get<std::string>() : name.dump();
}

std::string graph_tag(const json_io::Node& root, const char* tag, const char* fallback)
{
  if (root.has("graph") && root.at("graph").has(tag))
    return root.at("graph").at(tag).as_string();
  return fallback;
}

} // namespace

Trace import_dtr_log(const std::filesystem::path& path, DtrImportStats* stats) { return DtrImporter(path).run(stats); }

Trace import_checkmate_graph(const std::filesystem::path& path, double seconds_per_cost_unit)
{
  const std::string file = path.string();
  const json document = json_io::parse_text(read_possibly_gzipped(path), file);
  json_io::Node root(document, file);
  root.expect_object();
  const std::string ram_tag = graph_tag(root, "node_output_cost_tag", "cost_ram");
  const std::string time_tag = graph_tag(root, "node_duration_tag", "cost_cpu");
  auto nodes = root.at("nodes");
  const std::size_t count = nodes.size();
  std::unordered_map<std::string, std::size_t> index_of_id; // node-link ids may be numbers or strings
  std::vector<std::string> names(count);
  std::vector<std::uint64_t> bytes(count);
  std::vector<double> cost(count);
  std::vector<bool> backward(count, false);
  for (std::size_t i = 0; i < count; ++i) {
    auto node = nodes.item(i);
    node.expect_object();
    const char* id_key = node.has("id") ? "id" : "name";
    const std::string id = node.at(id_key).value().dump();
    if (!index_of_id.emplace(id, i).second)
      node.at(id_key).fail(fmt::format("duplicate node id {}", id));
    names[i] = node_name(node, i);
    auto ram = node.at(ram_tag.c_str());
    if (ram.as_number() < 0)
      ram.fail(fmt::format("negative size {}", ram.value().dump()));
    if (ram.as_number() >= 0x1p64)
      ram.fail(fmt::format("size {} does not fit in 64 bits", ram.value().dump()));
    bytes[i] = static_cast<std::uint64_t>(ram.as_number());
    auto time = node.at(time_tag.c_str());
    if (time.as_number() < 0)
      time.fail(fmt::format("negative cost {}", time.value().dump()));
    cost[i] = time.as_number();
    if (node.has("backward"))
      backward[i] = node.at("backward").as_bool();
  }
  std::vector<std::vector<std::size_t>> predecessors(count), successors(count);
  auto links = root.at(root.has("links") ? "links" : "edges");
  for (std::size_t j = 0; j < links.size(); ++j) {
    auto link = links.item(j);
    const char* source_key = link.has("source") ? "source" : "0";
    const char* target_key = link.has("target") ? "target" : "1";
    auto endpoint = [&](const char* key) {
      auto found = index_of_id.find(link.at(key).value().dump());
      if (found == index_of_id.end())
        link.at(key).fail(fmt::format("no node with id {}", link.at(key).value().dump()));
      return found->second;
    };
    std::size_t source = endpoint(source_key), target = endpoint(target_key);
    if (std::find(predecessors[target].begin(), predecessors[target].end(), source) == predecessors[target].end()) {
      predecessors[target].push_back(source);
      successors[source].push_back(target);
    }
  }
  // Kahn's algorithm, smallest node index first: deterministic, and the file's order when it is already one.
  std::vector<std::size_t> pending(count);
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < count; ++i)
    if ((pending[i] = predecessors[i].size()) == 0)
      ready.push(i);
  std::vector<std::size_t> order;
  while (!ready.empty()) {
    std::size_t node = ready.top();
    ready.pop();
    order.push_back(node);
    for (std::size_t next : successors[node])
      if (--pending[next] == 0)
        ready.push(next);
  }
  if (order.size() != count) {
    std::size_t stuck = 0;
    while (pending[stuck] == 0)
      ++stuck;
    throw InputError(
        fmt::format("{}: at /nodes/{}", file, stuck),
        fmt::format("the graph has a cycle: node '{}' is on or after one ({} of {} nodes cannot be ordered)",
                    names[stuck], count - order.size(), count));
  }
  Trace trace;
  trace.name = path.filename().string();
  if (root.has("graph") && root.at("graph").has("name") && root.at("graph").at("name").value().is_string())
    trace.name = root.at("graph").at("name").as_string();
  trace.source.tool = "memsim import checkmate";
  trace.source.device = "checkmate cost model";
  // Layers: forward nodes in order; a backward node 'X_backward' (Checkmate's naming) joins X's layer.
  std::unordered_map<std::string, int> forward_layer;
  int layers = 0;
  std::vector<int> layer(count, 0);
  for (std::size_t node : order)
    if (!backward[node])
      forward_layer[names[node]] = layer[node] = layers++;
  for (std::size_t node : order) {
    if (!backward[node])
      continue;
    std::string base = names[node];
    if (auto cut = base.rfind("_backward"); cut != std::string::npos)
      base.resize(cut);
    auto found = forward_layer.find(base);
    layer[node] = found != forward_layer.end() ? found->second : std::max(0, layers - 1);
  }
  std::vector<TensorId> tensor_of(count);
  for (std::size_t position = 0; position < order.size(); ++position) {
    std::size_t node = order[position];
    Tensor tensor;
    tensor.id = static_cast<TensorId>(position);
    tensor.name = names[node] + ".out";
    tensor.bytes = bytes[node];
    tensor.kind = backward[node] ? TensorKind::gradient : TensorKind::activation;
    trace.tensors.push_back(tensor);
    tensor_of[node] = tensor.id;
  }
  for (std::size_t position = 0; position < order.size(); ++position) {
    std::size_t node = order[position];
    Op op;
    op.id = static_cast<OpId>(position);
    op.name = names[node];
    op.type = "checkmate";
    op.phase = backward[node] ? Phase::backward : Phase::forward;
    op.layer = layer[node];
    std::vector<std::size_t> inputs = predecessors[node];
    std::sort(inputs.begin(), inputs.end(), [&](std::size_t a, std::size_t b) { return tensor_of[a] < tensor_of[b]; });
    for (std::size_t input : inputs)
      op.inputs.push_back(tensor_of[input]);
    op.outputs.push_back(tensor_of[node]);
    op.time_s = cost[node] * seconds_per_cost_unit;
    trace.ops.push_back(std::move(op));
  }
  // The graph's sinks are the iteration's results (the last gradients): they stay to the end, as in Checkmate.
  for (std::size_t node = 0; node < count; ++node)
    if (successors[node].empty() && !trace.ops.empty())
      trace.tensors[static_cast<std::size_t>(tensor_of[node])].free_after = static_cast<OpId>(trace.ops.size() - 1);
  validate_trace(trace, file);
  return trace;
}

// ---------------------------------------------------------------------------------------------------------------
// PyTorch execution graphs

namespace {

struct EgTensorRef {
  std::int64_t storage = 0;
  std::uint64_t end_bytes = 0; // (offset + numel) * itemsize
  std::string device;
};

// Schema 1.0.x encodes a tensor as [tensor_id, storage_id, offset, numel, itemsize(, device)].
std::optional<EgTensorRef> eg_tensor(const json& value, const std::string& where)
{
  if (!value.is_array() || value.size() < 5 || value.size() > 6)
    return std::nullopt;
  for (std::size_t i = 0; i < 5; ++i)
    if (!value[i].is_number_integer())
      return std::nullopt;
  EgTensorRef ref;
  const std::int64_t tensor_id = value[0].get<std::int64_t>();
  const std::int64_t storage = value[1].get<std::int64_t>();
  const std::int64_t offset = value[2].get<std::int64_t>();
  const std::int64_t numel = value[3].get<std::int64_t>();
  const std::int64_t itemsize = value[4].get<std::int64_t>();
  if (offset < 0 || numel < 0 || itemsize < 0)
    return std::nullopt;
  ref.storage = storage != 0 ? storage : -tensor_id; // storage id 0: no storage recorded, key by the tensor
  std::int64_t end = 0;
  if (__builtin_add_overflow(offset, numel, &end) || __builtin_mul_overflow(end, itemsize, &end))
    throw InputError(where, fmt::format("tensor [{}, {}, {}, {}, {}]: (offset + numel) × itemsize does not fit in "
                                        "64 bits",
                                        tensor_id, storage, offset, numel, itemsize));
  ref.end_bytes = static_cast<std::uint64_t>(end);
  ref.device = value.size() == 6 && value[5].is_string() ? value[5].get<std::string>() : "";
  return ref;
}

// `where`: "file: at /nodes/K/inputs" (the list's location).
void collect_tensors(const json& values, const json& types, const std::string& where, std::vector<EgTensorRef>& out)
{
  if (!values.is_array())
    return;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::string type =
        types.is_array() && i < types.size() && types[i].is_string() ? types[i].get<std::string>() : "";
    const std::string at = fmt::format("{}/{}", where, i);
    if (type.starts_with("Tensor")) {
      if (auto ref = eg_tensor(values[i], at))
        out.push_back(*ref);
    } else if (type.starts_with("GenericList") && values[i].is_array()) {
      for (std::size_t j = 0; j < values[i].size(); ++j)
        if (auto ref = eg_tensor(values[i][j], fmt::format("{}/{}", at, j)))
          out.push_back(*ref);
    }
  }
}

struct ProfileEvent {
  std::string name;
  double ts = 0, dur = 0;
  std::string tid;
  std::int64_t external_id = -1;
};

struct Profile {
  std::map<std::int64_t, ProfileEvent> by_record_function;         // Kineto: args["Record function id"]
  std::map<std::string, std::vector<ProfileEvent>> by_name;        // CPU ops by name, in start order
  std::map<std::string, std::vector<ProfileEvent>> cpu_ops_by_tid; // for kernels launched by nested ops
  std::unordered_map<std::int64_t, double> kernel_us_by_external_id;
};

Profile read_profile(const std::filesystem::path& path)
{
  const std::string file = path.string();
  const json document = json_io::parse_text(read_possibly_gzipped(path), file);
  const json* events = &document;
  if (document.is_object()) {
    if (!document.contains("traceEvents"))
      throw InputError(file + ": at /", "expected a Chrome trace (a list of events or an object with traceEvents)");
    events = &document["traceEvents"];
  }
  if (!events->is_array())
    throw InputError(file + ": at /traceEvents", "expected a list of events");
  Profile profile;
  const std::string events_path = document.is_object() ? "/traceEvents" : "";
  for (std::size_t i = 0; i < events->size(); ++i) {
    const json_io::Node event(events->at(i), file, fmt::format("{}/{}", events_path, i));
    if (!event.value().is_object() || event.get_string("ph", "") != "X" || !event.has("dur"))
      continue;
    ProfileEvent entry;
    entry.name = event.get_string("name", "");
    entry.ts = event.get_number("ts", 0.0);
    entry.dur = event.at("dur").as_number();
    if (entry.dur < 0)
      event.at("dur").fail(fmt::format("a duration must not be negative, found {}", entry.dur));
    entry.tid = event.has("tid") ? event.at("tid").value().dump() : "";
    const json args = event.has("args") ? (event.at("args").expect_object(), event.at("args").value()) : json::object();
    if (args.contains("External id") && args["External id"].is_number_integer())
      entry.external_id = args["External id"].get<std::int64_t>();
    const std::string category = event.get_string("cat", "");
    if (category == "kernel" || category == "gpu_memcpy" || category == "gpu_memset") {
      if (entry.external_id >= 0)
        profile.kernel_us_by_external_id[entry.external_id] += entry.dur;
      continue;
    }
    if (!category.empty() && category != "cpu_op" && category != "Operator")
      continue;
    if (args.contains("Record function id") && args["Record function id"].is_number_integer())
      profile.by_record_function[args["Record function id"].get<std::int64_t>()] = entry;
    profile.by_name[entry.name].push_back(entry);
    profile.cpu_ops_by_tid[entry.tid].push_back(entry);
  }
  auto by_start = [](const ProfileEvent& a, const ProfileEvent& b) { return a.ts < b.ts; };
  for (auto& [name, list] : profile.by_name)
    std::stable_sort(list.begin(), list.end(), by_start);
  for (auto& [tid, list] : profile.cpu_ops_by_tid)
    std::stable_sort(list.begin(), list.end(), by_start);
  return profile;
}

// Seconds of an op: the GPU kernels of every CPU op nested in it, or its CPU duration when it launched none.
double op_seconds(const Profile& profile, const ProfileEvent& event)
{
  double kernel_us = 0;
  auto found = profile.cpu_ops_by_tid.find(event.tid);
  if (found != profile.cpu_ops_by_tid.end() && !profile.kernel_us_by_external_id.empty())
    for (const auto& nested : found->second) {
      if (nested.ts < event.ts || nested.ts > event.ts + event.dur || nested.external_id < 0)
        continue;
      auto kernels = profile.kernel_us_by_external_id.find(nested.external_id);
      if (kernels != profile.kernel_us_by_external_id.end())
        kernel_us += kernels->second;
    }
  return (kernel_us > 0 ? kernel_us : event.dur) * 1e-6;
}

} // namespace

Trace import_pytorch_execution_graph(const std::filesystem::path& path,
                                     const std::optional<std::filesystem::path>& profile_path)
{
  const std::string file = path.string();
  const json document = json_io::parse_text(read_possibly_gzipped(path), file);
  json_io::Node root(document, file);
  root.expect_object();
  const std::string schema = root.at("schema").as_string();
  if (!schema.starts_with("1.0."))
    root.at("schema").fail(fmt::format("unsupported execution graph schema '{}' (supported: 1.0.x)", schema));
  auto nodes = root.at("nodes");
  struct EgNode {
    std::size_t index;
    std::int64_t id, parent, rf_id;
    std::string name;
  };
  std::vector<EgNode> all;
  std::unordered_map<std::int64_t, std::size_t> position_of_id;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto node = nodes.item(i);
    node.expect_object();
    EgNode entry{i, node.at("id").as_int(), node.get_int("parent", 0), node.get_int("rf_id", -1),
                 node.at("name").as_string()};
    if (!position_of_id.emplace(entry.id, all.size()).second)
      node.at("id").fail(fmt::format("duplicate node id {}", entry.id));
    all.push_back(entry);
  }
  auto ancestors_match = [&](const EgNode& node, auto predicate) {
    std::set<std::int64_t> seen;
    std::int64_t parent = node.parent;
    while (parent != node.id && seen.insert(parent).second) {
      auto found = position_of_id.find(parent);
      if (found == position_of_id.end())
        return false;
      const EgNode& up = all[found->second];
      if (predicate(up.name))
        return true;
      if (up.parent == up.id)
        return false;
      parent = up.parent;
    }
    return false;
  };
  // Top-level aten ops, in the order they started (node ids are assigned at entry).
  std::vector<const EgNode*> top;
  for (const EgNode& node : all)
    if (node.name.starts_with("aten::") &&
        !ancestors_match(node, [](const std::string& name) { return name.starts_with("aten::"); }))
      top.push_back(&node);
  std::sort(top.begin(), top.end(), [](const EgNode* a, const EgNode* b) { return a->id < b->id; });

  std::vector<std::vector<EgTensorRef>> reads(top.size()), writes(top.size());
  bool any_cuda = false;
  for (std::size_t k = 0; k < top.size(); ++k) {
    auto node = nodes.item(top[k]->index);
    const json empty = json::array();
    collect_tensors(node.has("inputs") ? node.at("inputs").value() : empty,
                    node.has("input_types") ? node.at("input_types").value() : empty,
                    fmt::format("{}/inputs", node.where()), reads[k]);
    collect_tensors(node.has("outputs") ? node.at("outputs").value() : empty,
                    node.has("output_types") ? node.at("output_types").value() : empty,
                    fmt::format("{}/outputs", node.where()), writes[k]);
    for (const auto* list : {&reads[k], &writes[k]})
      for (const auto& ref : *list)
        any_cuda = any_cuda || ref.device.starts_with("cuda");
  }
  // A GPU run: host tensors (step counters, scalars) are not device memory.
  auto counted = [&](const EgTensorRef& ref) { return !any_cuda || ref.device.starts_with("cuda"); };
  std::map<std::int64_t, std::uint64_t> storage_bytes;
  for (std::size_t k = 0; k < top.size(); ++k)
    for (const auto* list : {&reads[k], &writes[k]})
      for (const auto& ref : *list)
        if (counted(ref))
          storage_bytes[ref.storage] = std::max(storage_bytes[ref.storage], ref.end_bytes);

  std::optional<Profile> profile;
  if (profile_path)
    profile = read_profile(*profile_path);
  std::map<std::string, std::size_t> name_occurrence;

  Trace trace;
  trace.name = path.filename().string();
  trace.source.tool = fmt::format("memsim import pytorch-eg (schema {}){}", schema, profile ? " + profiler" : "");
  trace.source.device = any_cuda ? "cuda" : "cpu";
  std::unordered_map<std::int64_t, TensorId> tensor_of_storage;
  auto new_tensor = [&](std::int64_t storage, TensorKind kind, const std::string& name) {
    Tensor tensor;
    tensor.id = static_cast<TensorId>(trace.tensors.size());
    tensor.name = name;
    tensor.bytes = storage_bytes[storage];
    tensor.kind = kind;
    trace.tensors.push_back(tensor);
    tensor_of_storage[storage] = tensor.id;
    return tensor.id;
  };
  for (std::size_t k = 0; k < top.size(); ++k) {
    const EgNode& node = *top[k];
    Op op;
    op.id = static_cast<OpId>(k);
    op.name = node.name;
    op.type = node.name.substr(6);
    if (ancestors_match(node, [](const std::string& name) { return name.starts_with("Optimizer."); }))
      op.phase = Phase::update;
    else if (ancestors_match(node, [](const std::string& name) {
               return name.starts_with("autograd::engine::evaluate_function");
             }))
      op.phase = Phase::backward;
    auto add = [](std::vector<TensorId>& ids, TensorId id) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end())
        ids.push_back(id);
    };
    for (const auto& ref : reads[k]) {
      if (!counted(ref))
        continue;
      auto found = tensor_of_storage.find(ref.storage);
      // Read before any op produced it: it existed before the iteration (weights, the batch).
      TensorId id = found != tensor_of_storage.end()
                        ? found->second
                        : new_tensor(ref.storage, TensorKind::input, fmt::format("storage{}", ref.storage));
      add(op.inputs, id);
    }
    for (const auto& ref : writes[k]) {
      if (!counted(ref))
        continue;
      auto found = tensor_of_storage.find(ref.storage);
      if (found != tensor_of_storage.end()) { // in place, or a view of an existing storage
        if (std::find(op.outputs.begin(), op.outputs.end(), found->second) == op.outputs.end())
          add(op.inputs, found->second);
        continue;
      }
      const TensorKind kind = op.phase == Phase::forward    ? TensorKind::activation
                              : op.phase == Phase::backward ? TensorKind::gradient
                                                            : TensorKind::other;
      op.outputs.push_back(new_tensor(ref.storage, kind, fmt::format("{}#{}.out{}", node.name, k, op.outputs.size())));
    }
    if (profile) {
      const ProfileEvent* event = nullptr;
      auto by_rf = profile->by_record_function.find(node.rf_id);
      if (node.rf_id >= 0 && by_rf != profile->by_record_function.end()) {
        event = &by_rf->second;
      } else {
        // Profilers without record-function ids: the n-th op of this name is the n-th event of this name.
        std::size_t nth = name_occurrence[node.name]++;
        auto list = profile->by_name.find(node.name);
        if (list != profile->by_name.end() && nth < list->second.size())
          event = &list->second[nth];
      }
      if (event)
        op.time_s = op_seconds(*profile, *event);
    }
    trace.ops.push_back(std::move(op));
  }
  validate_trace(trace, file);
  return trace;
}

} // namespace memsim
