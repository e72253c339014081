"""Run state changes, split by who asks for them.

- `accept`: a person or an integration hands in a file; a run is created.
- `workers`: a stage worker claims, renews, reports, completes or fails a stage.
- `sweeper`: the sweeper takes back stages whose worker died.
- `people`: members, integrations and operators cancel and retry runs.

Every change goes through `history.run_save`, which saves the fields that
changed, writes the RunTransition (who, when, why) and, where work became
due, enqueues it after commit.
"""
