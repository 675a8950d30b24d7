"""GPU-side measurement (optional extra `roofwise[gpu]`): timers, calibration, ledgers traced
from PyTorch. Importing this package needs no torch; each module imports what it needs."""
