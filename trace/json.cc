#include "trace/json.h"
