"""Device-to-device copy: the bandwidth reference and a calibration workload."""
