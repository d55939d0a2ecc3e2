"""Candidate pools: draw once through the real services, price every configuration offline."""
