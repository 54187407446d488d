"""python -m poolx: prints the configuration (poolx.show_config())."""

from poolx._config import show_config

show_config()
