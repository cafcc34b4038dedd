#include "trace/record.h"
