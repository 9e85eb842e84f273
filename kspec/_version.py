"""kspec's version: a leaf every layer may import (the front door, kspec/__init__.py, re-exports it; a layer
importing it from there would reach up through the front door)."""

__version__ = "0.1.0"
