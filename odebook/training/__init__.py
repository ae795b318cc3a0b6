"""The one training loop, checkpoints, devices and precision, data parallelism, independent runs."""
