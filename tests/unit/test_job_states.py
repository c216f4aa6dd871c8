"""Job and pipeline states (checked transitions, the end state) and restart strategies, without Spark."""

from __future__ import annotations

import pytest

from streaming_engine.config.models import EnvConfig
from streaming_engine.control.states import (
    JOB_TRANSITIONS, PIPELINE_TRANSITIONS, JobStatus as J, PipelineStatus as P, job_end_state, job_machine,
    pipeline_machine,
)
from streaming_engine.errors import EngineError
from streaming_engine.runtime import restart


def test_the_states_are_seatunnels():
    assert [s.value for s in J] == [
        "INITIALIZING", "CREATED", "PENDING", "SCHEDULED", "RUNNING", "FAILING", "DOING_SAVEPOINT", "CANCELING",
        "FAILED", "SAVEPOINT_DONE", "CANCELED", "FINISHED", "UNKNOWABLE",
    ]
    assert {s for s in J if s.terminal} == {J.FAILED, J.SAVEPOINT_DONE, J.CANCELED, J.FINISHED, J.UNKNOWABLE}
    assert {s for s in P if s.terminal} == {P.FAILED, P.SAVEPOINT_DONE, P.CANCELED, P.FINISHED}


def test_a_job_walks_its_states_and_records_each_move():
    m = job_machine()
    for s in (J.CREATED, J.PENDING, J.SCHEDULED, J.RUNNING, J.FAILING, J.FAILED):
        m.move(s, f"to {s.value}")
    assert [(t.old, t.new) for t in m.history] == [
        (None, "INITIALIZING"), ("INITIALIZING", "CREATED"), ("CREATED", "PENDING"), ("PENDING", "SCHEDULED"),
        ("SCHEDULED", "RUNNING"), ("RUNNING", "FAILING"), ("FAILING", "FAILED"),
    ]
    assert m.history[-1].cause == "to FAILED"


@pytest.mark.parametrize("path, illegal", [
    ((), J.RUNNING),  # INITIALIZING cannot run before it was created and scheduled
    ((J.CREATED, J.PENDING, J.SCHEDULED, J.RUNNING), J.CANCELED),  # only through CANCELING
    ((J.CREATED, J.PENDING, J.SCHEDULED, J.RUNNING, J.FINISHED), J.RUNNING),  # an end state is final
    ((J.CREATED, J.PENDING, J.SCHEDULED, J.RUNNING, J.FAILING), J.FINISHED),
])
def test_an_illegal_job_transition_fails_loudly_and_changes_nothing(path, illegal):
    m = job_machine()
    for s in path:
        m.move(s)
    before = m.state
    with pytest.raises(EngineError) as e:
        m.move(illegal)
    assert e.value.condition == "JOB.ILLEGAL_TRANSITION"
    assert e.value.params["old"] == before.value and e.value.params["new"] == illegal.value
    assert m.state is before and len(m.history) == len(path) + 1


def test_a_pipeline_restarts_through_created_and_cannot_skip_deploying():
    m = pipeline_machine("p")
    for s in (P.SCHEDULED, P.DEPLOYING, P.RUNNING, P.FAILING, P.CREATED, P.SCHEDULED, P.DEPLOYING, P.RUNNING, P.FINISHED):
        m.move(s)
    assert m.state is P.FINISHED
    fresh = pipeline_machine("q")
    with pytest.raises(EngineError):
        fresh.move(P.RUNNING)


def test_every_state_reaches_an_end_and_ends_have_no_way_out():
    for table, ends in ((JOB_TRANSITIONS, {s for s in J if s.terminal}), (PIPELINE_TRANSITIONS, {s for s in P if s.terminal})):
        for s, nexts in table.items():
            if s in ends:
                assert not nexts, s
                continue
            seen, todo = set(), [s]
            while todo:
                for n in table[todo.pop()]:
                    if n not in seen:
                        seen.add(n)
                        todo.append(n)
            assert seen & ends, f"{s} never ends"


@pytest.mark.parametrize("pipelines, savepoint, end", [
    ([P.FINISHED, P.FINISHED], False, J.FINISHED),
    ([P.FINISHED, P.FAILED], False, J.FAILED),
    ([P.CANCELED, P.FAILED], False, J.FAILED),
    ([P.CANCELED, P.FINISHED], False, J.CANCELED),
    ([P.SAVEPOINT_DONE, P.FINISHED], False, J.SAVEPOINT_DONE),
    ([P.SAVEPOINT_DONE, P.SAVEPOINT_DONE], True, J.SAVEPOINT_DONE),
])
def test_the_job_end_state_is_derived_from_its_pipelines(pipelines, savepoint, end):
    assert job_end_state(pipelines, savepoint) is end


def test_no_end_state_while_a_pipeline_runs():
    with pytest.raises(EngineError):
        job_end_state([P.FINISHED, P.RUNNING])


# -- restart strategies -----------------------------------------------------------
def _tracker(**env) -> restart.RestartTracker:
    return restart.tracker(EnvConfig.model_validate(env))


def test_fixed_delay_grants_job_retry_times_restarts_at_the_interval():
    t = _tracker(**{"job.retry.times": 2, "job.retry.interval.seconds": 7})
    assert [t.on_failure(x) for x in (0, 100, 200, 300)] == [7.0, 7.0, None, None]


def test_fixed_delay_with_zero_times_never_restarts():
    assert _tracker(**{"job.retry.times": 0}).on_failure(0) is None


def test_none_never_restarts():
    assert _tracker(**{"restart.strategy": "none", "job.retry.times": 5}).on_failure(0) is None


def test_failure_rate_gives_up_only_when_too_many_failures_fall_in_the_interval():
    t = _tracker(**{"restart.strategy": "failure-rate", "restart.failure_rate.max_failures": 2,
                    "restart.failure_rate.interval.seconds": 60, "job.retry.interval.seconds": 1})
    assert t.on_failure(0) == 1.0 and t.on_failure(10) == 1.0
    assert t.on_failure(20) is None  # a third failure within 60 s
    t = _tracker(**{"restart.strategy": "failure-rate", "restart.failure_rate.max_failures": 2,
                    "restart.failure_rate.interval.seconds": 60})
    assert all(t.on_failure(x) is not None for x in (0, 40, 80, 120, 160))  # never more than two in a minute


def test_exponential_delay_grows_to_its_maximum_with_jitter_and_resets_after_a_quiet_period():
    t = _tracker(**{"restart.strategy": "exponential-delay", "restart.backoff.initial.seconds": 1,
                    "restart.backoff.multiplier": 2, "restart.backoff.max.seconds": 10, "restart.backoff.jitter": 0,
                    "restart.backoff.reset.seconds": 100})
    assert [t.on_failure(x) for x in (0, 1, 2, 3, 4, 5)] == [1, 2, 4, 8, 10, 10]
    assert t.on_failure(500) == 1  # quiet for longer than the reset period
    jittered = {"restart.strategy": "exponential-delay", "restart.backoff.initial.seconds": 10, "restart.backoff.jitter": 0.2}
    delays = [_tracker(**jittered).on_failure(0) for _ in range(30)]  # each one a first delay
    assert all(8 <= d <= 12 for d in delays) and len(set(delays)) > 1


@pytest.mark.parametrize("message, heals", [
    ("RuntimeFailure: [RUNTIME.FAILED] job j, pipeline-1, epoch 3: Py4JJavaError: connection reset", True),
    ("[ASSERT.FAILED] Assert rule failed: ...", False),
    ("[CHECKPOINT.BEHIND_TARGETS] the checkpoint /x is behind its targets", False),
    ("[SCHEMA.INCOMPATIBLE] table 't' is not compatible", False),
    ("org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed", False),
    ("FATAL: password authentication failed for user \"x\"", False),
    # Spark's and Delta's errors by their SQLSTATE class: 42 (analysis), 22 (data, e.g. a type conflict), 28 never heal
    ("RuntimeFailure: [RUNTIME.FAILED] job j, pipeline-1, epoch 0: AnalysisException: [_LEGACY_ERROR_TEMP_DELTA_0007] "
     "A schema mismatch detected when writing to the Delta table (SQLSTATE: 42KDG)", False),
    ("AnalysisException: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column ... cannot be resolved. SQLSTATE: 42703", False),
    ("AnalysisException: [DELTA_FAILED_TO_MERGE_FIELDS] Failed to merge fields 'id' and 'id' (SQLSTATE: 22005)", False),
    ("[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] ConcurrentAppendException: Files were added (SQLSTATE: 2D521)", True),
])
def test_errors_that_cannot_heal_never_restart(message, heals):
    assert restart.retriable(message) is heals


def test_the_job_name_does_not_decide_whether_a_failure_heals():
    name = "AccessDeniedException_drill"
    message = f"RuntimeFailure: [RUNTIME.FAILED] job {name}, pipeline-1, epoch 3: connection reset"
    assert restart.retriable(message) is False  # what a look at the whole text would say
    assert restart.retriable(message, name) is True
    # a job whose name is part of a condition still fails at once on that condition
    assert restart.retriable("[CONFIG.INVALID_OPTION] job CONFIG, pipeline-1: bad option", "CONFIG") is False
    assert restart.retriable("RuntimeFailure: [RUNTIME.FAILED] job j, pipeline-1, epoch 0: AnalysisException: x "
                             "(SQLSTATE: 42703)", "j") is False


def test_restart_options_are_validated():
    with pytest.raises(Exception) as e:
        EnvConfig.model_validate({"restart.strategy": "sometimes"})
    assert "fixed-delay" in str(e.value)


def test_a_pipeline_restarted_for_weeks_keeps_a_bounded_history_in_memory():
    m = pipeline_machine("p")
    m.move(P.SCHEDULED)
    m.move(P.DEPLOYING)
    m.move(P.RUNNING)
    for _ in range(10_000):  # restarts: the history table keeps them all, the driver the latest
        for s in (P.FAILING, P.CREATED, P.SCHEDULED, P.DEPLOYING, P.RUNNING):
            m.move(s)
    assert len(m.history) <= 64 and m.history[-1].new == "RUNNING"


def test_a_source_reporting_new_columns_asks_for_a_new_plan_and_a_schema_change_it_refuses_is_final():
    replan = "RuntimeFailure: [RUNTIME.FAILED] job j, pipeline-1, epoch 4: PythonException: [RUNTIME.SCHEMA_CHANGED] table a"
    assert restart.replan_requested(replan)
    refused = "[RUNTIME.FAILED] job j, epoch 4: PythonException: [SCHEMA.CHANGED] table a changed while the job ran"
    assert not restart.replan_requested(refused) and restart.retriable(refused) is False
    assert not restart.replan_requested("[RUNTIME.FAILED] RUNTIME.SCHEMA_CHANGED without brackets")


def test_a_pipeline_planned_again_goes_back_through_created_and_no_restart_is_counted():
    from streaming_engine.control.master import JobMaster
    from streaming_engine.job import compile_text
    from streaming_engine.runtime.events import PipelineReplanned, PipelineStarted, PipelineStarting

    from streaming_engine.control.master import plans
    from streaming_engine.plan.render import to_json

    text = ('env { job.name = replanned }\nsource { FakeSource { plugin_output = a, row.num = 1,'
            ' schema = { fields { id = int } } } }\nsink { Console { plugin_input = a } }')
    job = compile_text(text)
    again = compile_text(text.replace("id = int", "id = int, c = string"))  # what the new plan reads
    master = JobMaster(job)
    (key,) = master.pipelines
    for e in (PipelineStarting("replanned", key, 1), PipelineStarted("replanned", key, "/ck", 1),
              PipelineReplanned("replanned", key, 1, "[RUNTIME.SCHEMA_CHANGED] table t has new columns c", ("t.c",),
                                to_json(again)),
              PipelineStarting("replanned", key, 2), PipelineStarted("replanned", key, "/ck", 2)):
        master.on_event(e)
    assert master.pipelines[key].state.name == "RUNNING" and master.restarts[key] == 0
    moves = [(t.old, t.new, t.cause) for t in master.pipelines[key].history]
    assert ("RUNNING", "FAILING", "[RUNTIME.SCHEMA_CHANGED] table t has new columns c") in moves
    assert ("FAILING", "CREATED", "planned again for a schema change (columns t.c)") in moves
    # from now on the job's plans (explain, a savepoint) are the new ones, recorded with the pipeline's CREATED
    assert master.plans_now == plans(again) != plans(job)
    recorded = [r for r in master._pending if r["entity"] != "job" and r["state"] == "CREATED" and r["detail"]]
    assert recorded and '"c"' in recorded[-1]["detail"], recorded


def test_the_rest_api_shows_the_plans_of_the_last_replan_live_and_from_history():
    """The REST job view of a running job switches to the plans a PipelineReplanned carries; a job read back
    from the history table shows the newest plans it recorded (a pipeline's CREATED after a re-plan), not the
    ones it was submitted with."""
    import json

    from streaming_engine.api.jobs import Submitted, _from_history
    from streaming_engine.control.master import JobMaster, plans
    from streaming_engine.job import compile_text
    from streaming_engine.plan.render import to_json
    from streaming_engine.runtime.events import PipelineReplanned

    text = ('env { job.name = shown }\nsource { FakeSource { plugin_output = a, row.num = 1,'
            ' schema = { fields { id = int } } } }\nsink { Console { plugin_input = a } }')
    job, again = compile_text(text), compile_text(text.replace("id = int", "id = int, c = string"))
    master = JobMaster(job)
    (key,) = master.pipelines
    s = Submitted(job, master, 0.0, False, plans(job), {}, {})
    s.on_event(PipelineReplanned("shown", key, 1, "changed", ("t.c",), to_json(again)))
    assert s.view()["plans"] == plans(again) != plans(job)

    rows = [
        {"job_id": "1", "seq": 1, "entity": "job", "state": "CREATED", "previous": None, "at": None,
         "detail": json.dumps({"plans": plans(job)})},
        {"job_id": "1", "seq": 5, "entity": key, "state": "CREATED", "previous": "FAILING", "at": None,
         "detail": json.dumps({"plans": plans(again)})},
        {"job_id": "1", "seq": 6, "entity": key, "state": "CREATED", "previous": "FAILING", "at": None, "detail": None},
    ]
    summary = {"job_id": "1", "job_name": "shown", "state": "RUNNING"}
    assert _from_history(summary, rows[::-1])["plans"] == plans(again)
    assert _from_history(summary, rows[:1])["plans"] == plans(job)


def test_a_run_planned_as_it_last_ran_shows_and_records_those_plans():
    """A run that plans the job from its checkpoint's stored sources (runner._as_last_planned: a column a
    lenient source kept) says so in JobStarted: the master's plans (a savepoint's), the REST view and the
    history (with each pipeline's first start, not its restarts) are those, not the config's compile."""
    import json

    from streaming_engine.api.jobs import Submitted, _from_history
    from streaming_engine.control.master import JobMaster, plans
    from streaming_engine.job import compile_text
    from streaming_engine.plan.render import to_json
    from streaming_engine.runtime.events import JobStarted, PipelineFailed, PipelineStarted, PipelineStarting

    text = ('env { job.name = kept }\nsource { FakeSource { plugin_output = a, row.num = 1,'
            ' schema = { fields { id = int } } } }\nsink { Console { plugin_input = a } }')
    job, last = compile_text(text), compile_text(text.replace("id = int", "id = int, gone = string"))
    master = JobMaster(job)
    (key,) = master.pipelines
    s = Submitted(job, master, 0.0, False, plans(job), {}, {})
    started = JobStarted("kept", "BATCH", ("p",), to_json(last))
    for e in (started, PipelineStarting("kept", key, 1), PipelineStarted("kept", key, "/ck", 1),
              PipelineFailed("kept", key, 1, "boom", restart_in=0.0), PipelineStarting("kept", key, 2)):
        master.on_event(e)
        s.on_event(e)
    assert master.plans_now == plans(last) != plans(job)
    assert s.view()["plans"] == plans(last)
    with_plans = [r for r in master._pending if r["detail"] and '"plans"' in r["detail"]]
    assert [(r["entity"], r["state"]) for r in with_plans][-1] == (key, "DEPLOYING")
    assert len([r for r in with_plans if r["entity"] == key]) == 1  # the restart's start records none
    assert '"gone"' in with_plans[-1]["detail"]
    rows = [dict(r, job_id="1", seq=i) for i, r in enumerate(master._pending)]
    assert _from_history({"job_id": "1", "job_name": "kept", "state": "RUNNING"}, rows)["plans"] == plans(last)
    # a run that planned the job as its config says publishes no plans: nothing changes
    other = JobMaster(job)
    other.on_event(JobStarted("kept", "BATCH", ("p",)))
    assert other.plans_now is None
