#include "memsim/common/policy_registry.hpp"

namespace memsim {

PolicyRegistry& policy_registry()
{
  static PolicyRegistry registry("policy");
  return registry;
}

} // namespace memsim
