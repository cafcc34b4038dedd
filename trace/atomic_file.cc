#include "trace/atomic_file.h"
