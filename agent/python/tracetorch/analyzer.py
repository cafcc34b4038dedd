"""Anomaly detection (the tracetorch-ml library's ``tracetorch.analyzer``).

    from tracetorch.analyzer import Thresholds, detect_anomalies

    for a in detect_anomalies(record, Thresholds(exploding_variance_std=50.0)):
        print(a.severity.value, a.layer, a.message)

The checks run in C++ (trace/anomaly.h).
"""

from tracetorch._C import Anomaly, AnomalySeverity, AnomalyType, Thresholds, detect_anomalies

# The thresholds detect_anomalies uses when given none.
DEFAULT_THRESHOLDS = Thresholds()

__all__ = ["DEFAULT_THRESHOLDS", "Anomaly", "AnomalySeverity", "AnomalyType", "Thresholds",
           "detect_anomalies"]
