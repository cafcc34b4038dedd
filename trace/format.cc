#include "trace/format.h"
