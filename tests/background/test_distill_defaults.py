"""Seed 000's distillation schedule and switches are kith's defaults: short daily at 03:00, mid on
Sundays at 03:30, long on the 1st at 04:00 and off until turned on, notices after mid and long."""

from __future__ import annotations

from gateway.memory.background.settings import DistillConfig


def test_the_seed_schedule_switches_and_budgets_are_the_defaults() -> None:
    cfg = DistillConfig()
    assert (cfg.short.cron, cfg.mid.cron, cfg.long.cron) == ("0 3 * * *", "30 3 * * 0", "0 4 1 * *")
    assert cfg.short.enabled and cfg.mid.enabled and not cfg.long.enabled  # "first run warrants manual review"
    assert cfg.mid.backend == "cheap" and cfg.long.backend == "main"  # local/cheap for mid, the primary for long
    assert (cfg.short.budget_tokens, cfg.mid.budget_tokens, cfg.long.budget_tokens) == (3000, 2000, 2000)
    assert cfg.notify_tiers == ["mid", "long"]
