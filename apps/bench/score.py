"""The benchmark's figures, computed from result records only (pure functions).

accuracy = (YES + 0.5 PARTIAL) / test cases x 100 over every test case of the records scored; a
test case with no result yet counts 0 and is reported as missing, so a partial run never looks
better than it is. Appearance is the mean over all instructions, 0 for a site that never started
(or has no grade yet).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from webgen_agent.apps.bench.views import (
    CREDIT,
    BenchSummary,
    CaseResult,
    Cost,
    GenerationRecord,
    Rates,
    SiteResult,
    Verdict,
)
from webgen_agent.tools.webgen_bench import BenchRecord


def rates(verdicts: Iterable[Verdict | None]) -> Rates:
    """Counts and percentages over a group; None stands for a test case without a result."""
    listed = list(verdicts)
    total = len(listed)
    counts = {verdict: sum(1 for v in listed if v == verdict) for verdict in CREDIT}
    missing = sum(1 for v in listed if v is None)

    def percent(n: float) -> float:
        return round(100.0 * n / total, 2) if total else 0.0

    return Rates(
        test_cases=total,
        yes=counts["YES"],
        partial=counts["PARTIAL"],
        no=counts["NO"],
        start_failed=counts["START_FAILED"],
        missing=missing,
        accuracy=percent(sum(CREDIT[v] for v in listed if v is not None)),
        yes_rate=percent(counts["YES"]),
        partial_rate=percent(counts["PARTIAL"]),
        no_rate=percent(counts["NO"]),
        start_failed_rate=percent(counts["START_FAILED"]),
    )


def _cost(units: int, seconds: float, input_tokens: int, output_tokens: int) -> Cost:
    return Cost(
        units=units,
        seconds=round(seconds, 3),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        seconds_per_unit=round(seconds / units, 3) if units else 0.0,
        tokens_per_unit=round((input_tokens + output_tokens) / units, 1) if units else 0.0,
    )


def generation_cost(generated: Iterable[GenerationRecord]) -> Cost:
    """Per instruction, over the runs that finished (node time, so resumed runs count once)."""
    done = [g for g in generated if g.status == "finished"]
    return _cost(
        len(done),
        sum(g.node_seconds for g in done),
        sum(g.input_tokens for g in done),
        sum(g.output_tokens for g in done),
    )


def evaluation_cost(cases: Iterable[CaseResult], sites: Iterable[SiteResult]) -> Cost:
    """Per test case: the GUI runs and verdicts, plus each site's start and appearance grade."""
    cases, sites = list(cases), list(sites)
    return _cost(
        len(cases),
        sum(c.seconds for c in cases) + sum(s.seconds for s in sites),
        sum(c.input_tokens for c in cases) + sum(s.input_tokens for s in sites),
        sum(c.output_tokens for c in cases) + sum(s.output_tokens for s in sites),
    )


def summarize(
    records: list[BenchRecord],
    cases: Mapping[tuple[str, int, str], CaseResult],
    sites: Mapping[str, SiteResult],
    *,
    data: str,
    generated: Iterable[GenerationRecord] | None = None,
    models: dict[str, str] | None = None,
) -> BenchSummary:
    """The summary of ``records`` from the results found for them (keyed as the records key themselves)."""
    verdicts: list[Verdict | None] = []
    by_instruction: dict[str, list[Verdict | None]] = defaultdict(list)
    by_case: dict[str, list[Verdict | None]] = defaultdict(list)
    found: list[CaseResult] = []
    for record in records:
        for index, case in enumerate(record.test_cases):
            result = cases.get((record.id, index, case.task))
            verdict = result.verdict if result is not None else None
            if result is not None:
                found.append(result)
            verdicts.append(verdict)
            by_instruction[record.category.primary_category].append(verdict)
            by_case[case.task_category.primary_category].append(verdict)

    scores: dict[str, list[int]] = defaultdict(list)
    graded: list[SiteResult] = []
    for record in records:
        site = sites.get(record.id)
        if site is not None:
            graded.append(site)
        scores[record.category.primary_category].append(site.appearance if site is not None else 0)
    all_scores = [s for group in scores.values() for s in group]

    return BenchSummary(
        data=data,
        instructions=len(records),
        test_cases=len(verdicts),
        overall=rates(verdicts),
        by_instruction_category={name: rates(group) for name, group in sorted(by_instruction.items())},
        by_case_category={name: rates(group) for name, group in sorted(by_case.items())},
        appearance=_mean(all_scores),
        appearance_by_instruction_category={name: _mean(group) for name, group in sorted(scores.items())},
        sites_started=sum(1 for s in graded if s.started),
        generation=generation_cost(generated) if generated is not None else None,
        evaluation=evaluation_cost(found, graded),
        models=models or {},
    )


def _mean(values: list[int]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0
