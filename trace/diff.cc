#include "trace/diff.h"
