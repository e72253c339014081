"""Run services, split by who asks for them.

- `accept`, `admission`, `direct_uploads`: a person or an integration hands in a
  file; a run is created, or refused at once when the pipeline is full.
- `workers`: a stage worker claims, renews, reports, completes or fails a stage
  (`stage_sql`: the claim and the completion as one statement on PostgreSQL).
- `take_back`: the sweeper takes back stages whose worker died.
- `people`: members, integrations and operators cancel, retry and requeue runs.
- `deletion`: a document deleted, its runs stopped first.

Every change of a run's status or stage is a move of the table in `transitions`,
made by `transitions.run_move` (or, for the claim and the completion, with the
changes it gives): the move checked, the RunTransition written (who, when, why),
held pages given back when a run ends, and what became due enqueued after commit.
"""
