"""subaudit: auditing differentially private training under substitute adjacency."""

__version__ = "0.1.0"
