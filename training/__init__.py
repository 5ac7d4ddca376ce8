"""The lab: labels, router training and evaluation, and the benchmarks, one subpackage per job (docs/design.md)."""
