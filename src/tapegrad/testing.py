"""Public testing helpers: gradient checks against central finite differences."""
