"""`make soak`: the real process layout (`manage.py serve` and its children) under mixed load
for a set time while a seeded fault injector fills, remounts and plants files in the items and
logs directories (each a small tmpfs) and sends control characters in every text field; then a
final drain and the checks (soak/checks.py). `python -m soak.run --help` says how to run it.
"""
