"""Shapes and helpers every part of the core shares: violations, their text, atomic writes, parallel runs."""
