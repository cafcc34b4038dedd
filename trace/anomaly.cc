#include "trace/anomaly.h"
