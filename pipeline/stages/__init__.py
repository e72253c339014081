"""The stage bodies, one module each: `run(ctx: StageContext) -> None`.

A body reads what it needs through `ctx`, does its work idempotently and
writes its result through services. What must be saved together with
"the next stage is due" goes inside `with ctx.complete():`; a body with
nothing to save simply returns and the engine completes the stage.
Problems are raised (`pipeline.errors`, or a `core.errors.ServiceError` about
the document itself); the engine classifies them. `pipeline/stage_list.py` lists
the stages in order.
"""
