#include "trace/aggregator.h"
