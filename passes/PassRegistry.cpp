// The list of every pass (filled in as passes land).
#include "nnc/passes/PassManager.h"
