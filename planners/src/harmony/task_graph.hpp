#pragma once
// Harmony's task graph (task_graph_composor.py): FWD tasks in layer order, then (BWD, UPD) pairs in reverse layer
// order; pp binds task j of P_F + reverse(P_B) to GPU j mod N, dp gives every rank the whole list on its share of
// the minibatch. Each task records the channel of every boundary tensor.
#include "memsim/planners/harmony/estimator.hpp"

#include <utility>
#include <vector>

namespace memsim::harmony {

enum class TaskType { forward, backward, update };

// DAT: from the data loader; P2P: GPU to GPU; SWP: through the host, same rank; MSG: through host memory, with a
// copy between rank processes when the ranks differ.
enum class Channel { none, data, p2p, swap, message };

struct Link {
  Channel channel = Channel::none;
  int task = -1; // the task at the other end
};

struct Task {
  TaskType type = TaskType::forward;
  LayerPack pack;
  int rank = 0;
  std::vector<int> microbatches;                    // sizes of the group's microbatches (empty for UPD)
  bool has_data = false;                            // holds layer 0
  bool has_criterion = false;                       // holds layer R-1 (the loss)
  Link input;                                       // X of the first layer (FWD, criterion BWD)
  Link output;                                      // Y of the last layer (FWD)
  Link gradient_in;                                 // dY (non-criterion BWD)
  Link gradient_out;                                // dX (BWD without layer 0)
  std::vector<std::pair<std::size_t, int>> stashes; // FWD: (layer, BWD task) inputs stashed for recompute
  int stash_source = -1;                            // non-criterion BWD: the FWD task stashing its input
};

struct TaskGraph {
  std::vector<Task> tasks; // pp: all ranks; dp: rank 0's list (the others are identical)
  int gpus = 1;
  int ranks = 1;            // ranks holding tasks: the N of the bandwidth shares
  bool single_rank = false; // dp, or pp on one GPU: Harmony simulates one rank
  std::vector<int> microbatches_forward;
  std::vector<int> microbatches_backward;
};

// [u, u, ..., remainder]
std::vector<int> split_minibatch(int samples, int u);

TaskGraph compose_task_graph(std::size_t layers, int gpus, int minibatch, Mode mode, const Configuration& config);

// Re-split of forward microbatches into backward ones (the loss task runs at U_B; UBSConverter in Harmony).
struct MicrobatchConversion {
  std::vector<std::vector<int>> backward_of_forward; // backward indices made from forward microbatch i
  std::vector<int> forward_of_backward;
};
MicrobatchConversion convert_microbatches(const std::vector<int>& forward, const std::vector<int>& backward,
                                          int u_backward);

} // namespace memsim::harmony
