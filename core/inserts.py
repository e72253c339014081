"""New rows of several tables written in one statement.

The accept path records four related rows per upload (document, quota reservation, run,
its first transition). Saved one by one, each costs a round trip and the ORM's work of
compiling an INSERT (about 1.5 ms of the web process's CPU per upload, of 8 to 10). Here
they go in one statement, one data-modifying CTE per row. The statement for a shape of
rows (their models, and which keys come from earlier rows) is written once; a call only
reads the values. The rows are what `save()` writes:
every concrete field, its Python default and `auto_now`/`auto_now_add` applied by the
field itself, so a plain field added to a model needs nothing here. What this does not
do (a database default or expression as a value, a generated column, a model with a
parent model, a key to an unsaved row outside the call) it refuses, rather than write
something else than `save()` would.
"""

from functools import cache

from django.db import connection
from django.db.models import Model


def _key_of(obj: Model, field, batch: list[Model]) -> int | None:
    """For a foreign key to an earlier row of the batch whose key the database assigns:
    that row's position, so the statement can read its key back."""
    if getattr(obj, field.attname) is not None or not field.is_cached(obj):
        return None
    target = field.get_cached_value(obj)
    if target is None:
        return None
    for position, earlier in enumerate(batch):
        if earlier is target:
            return position
    raise ValueError(  # as save() refuses it, instead of writing NULL
        f"{obj._meta.label}.{field.name} points to an unsaved "
        f"{target._meta.label} that is not earlier in the same rows_insert()"
    )


def _value(obj: Model, field):
    value = field.pre_save(obj, add=True)
    if hasattr(value, "as_sql") or getattr(field, "generated", False):
        raise TypeError(f"rows_insert() writes plain values only: {obj._meta.label}.{field.name}")
    return field.get_db_prep_save(value, connection=connection)


def insert_values(
    obj: Model, *, computed: dict[str, str] | None = None
) -> tuple[list[str], list[str], list]:
    """What `save()` would insert for the unsaved `obj`: its quoted columns, the SQL of
    each value and their parameters. `computed` gives SQL for some columns (by field
    name) in place of the instance's values, e.g. a key read from another statement."""
    meta = obj._meta
    if meta.parents:
        raise TypeError(f"rows_insert() cannot write {meta.label}: it has a parent model")
    computed = computed or {}
    columns, values, params = [], [], []
    for field in meta.concrete_fields:
        if field.primary_key and obj.pk is None:
            continue  # the database assigns it; RETURNING gives it back
        columns.append(connection.ops.quote_name(field.column))
        if field.name in computed:
            values.append(computed[field.name])
            continue
        values.append("%s")
        params.append(_value(obj, field))
    return columns, values, params


def insert_params(obj: Model, *, computed: dict[str, str] | None = None) -> list:
    """The parameters of `insert_values(obj, computed=...)` alone, in its order: for a
    statement written once from a model's columns, whose values change per call."""
    computed = computed or {}
    return [
        _value(obj, field)
        for field in obj._meta.concrete_fields
        if not (field.primary_key and obj.pk is None) and field.name not in computed
    ]


def _statement(objs: list[Model]) -> tuple[str, list, list]:
    """The statement, its parameters, and the (row, foreign key) pairs it reads back."""
    shape, read_back = [], []
    for position, obj in enumerate(objs):
        earlier_keys = []
        for field in obj._meta.concrete_fields:
            earlier = _key_of(obj, field, objs[:position]) if field.is_relation else None
            if earlier is not None:
                earlier_keys.append((field.name, earlier))
                read_back.append((obj, field))
        shape.append((type(obj), obj.pk is None, tuple(earlier_keys)))
    sql, fields = _written(tuple(shape))
    params = [_value(obj, field) for obj, row in zip(objs, fields, strict=True) for field in row]
    return sql, params, read_back


@cache
def _written(shape: tuple) -> tuple[str, list[list]]:
    """The statement for rows of this shape (each row's model, whether the database
    assigns its key, and which of its keys come from earlier rows), and the fields whose
    values are its parameters, row by row: written once, the values read per call."""
    parts, fields = [], []
    for position, (model, assigned, earlier_keys) in enumerate(shape):
        if model._meta.parents:
            raise TypeError(f"rows_insert() cannot write {model._meta.label}: it has a parent")
        computed = {
            name: f"(SELECT {_pk(shape[earlier][0])} FROM row_{earlier})"
            for name, earlier in earlier_keys
        }
        columns, values, row = [], [], []
        for field in model._meta.concrete_fields:
            if field.primary_key and assigned:
                continue  # the database assigns it; RETURNING gives it back
            columns.append(connection.ops.quote_name(field.column))
            values.append(computed.get(field.name, "%s"))
            if field.name not in computed:
                row.append(field)
        fields.append(row)
        parts.append(
            f"row_{position} AS (INSERT INTO {connection.ops.quote_name(model._meta.db_table)} "
            f"({', '.join(columns)}) VALUES ({', '.join(values)}) RETURNING {_pk(model)})"
        )
    keys = ", ".join(f"(SELECT {_pk(model)} FROM row_{i})" for i, (model, *_) in enumerate(shape))
    return f"WITH {', '.join(parts)} SELECT {keys}", fields


def _pk(model: type[Model] | Model) -> str:
    return connection.ops.quote_name(model._meta.pk.column)


def rows_insert(*objs: Model) -> None:
    """Insert unsaved instances, in this order, as one statement.

    A foreign key may point to an earlier instance of the call whose key the database
    assigns (set as `run.reservation = reservation`): the statement reads that key back.
    Afterwards every instance is saved, keys set. Foreign keys between the rows are
    checked at commit (Django makes them deferred on PostgreSQL), so the order only has
    to put an assigned key before its users."""
    sql, params, read_back = _statement(list(objs))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        keys = cursor.fetchone()
    for obj, key in zip(objs, keys, strict=True):
        obj.pk = key
        obj._state.adding, obj._state.db = False, connection.alias
    for obj, field in read_back:  # the keys the database assigned just now
        setattr(obj, field.name, field.get_cached_value(obj))  # as save() does
