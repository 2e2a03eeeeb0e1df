# SPDX-License-Identifier: GPL-2.0
"""The pieces of scripts/bench-report.py, which turns the `RRDMA-BENCH
{json}` lines of `make bench` into a ratio table, a JSON report and a PNG
plot (its docstring says how each figure is computed).

- schedule: what the bench measures (sizes, depths, queues) and the targets
- logs: reading the records out of the logs
- figures: one record's figures, and their spread over rounds
- build: the report, per topology and provider
- table: the report as text
- plot: the report as a PNG
"""
