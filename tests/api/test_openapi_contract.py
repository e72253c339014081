"""The OpenAPI document as a contract a generated client can rely on: every operation's
statuses, headers and bounds, the codes, the fields always sent. What the server
actually answers is held to it by test_schemathesis.py and test_generated_client.py."""

import json

import pytest
from django.test import override_settings

from api.errors import ErrorCode
from api.openapi import TAGS
from config.api import api
from pipeline.models import ImportRun
from pipeline.services.accept import MAX_FILENAME_LENGTH
from tests.support.codes import codes_in_source
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run

OPERATION_IDS = {
    "documents_upload",
    "documents_list",
    "documents_get",
    "documents_delete",
    "documents_file",
    "documents_page_picture",
    "runs_get",
    "runs_retry",
    "runs_cancel",
    "search",
    "uploads_create",
    "uploads_complete",
    "quota_get",
    "tokens_list",
    "tokens_revoke",
    "webhooks_list",
    "webhooks_create",
    "webhooks_get",
    "webhooks_update",
    "webhooks_delete",
    "webhooks_rotate_secret",
    "webhooks_test",
    "webhooks_deliveries",
    "webhooks_delivery_send_again",
}


def test_the_code_enum_is_exactly_the_codes_the_server_writes():
    written = codes_in_source()
    declared = {code.value for code in ErrorCode}

    undeclared = {code: where for code, where in written.items() if code not in declared}
    unused = declared - set(written)
    assert not undeclared, f"add to api.errors.ErrorCode: {undeclared}"
    assert not unused, f"no code writes these ErrorCode members: {unused}"


def test_the_scan_finds_codes_written_each_way():
    # A code the scan could not see would pass the test above unseen.
    written = codes_in_source()

    for code in ("rate_limited", "unauthorized", "timeout", "unexpected_error"):
        assert code in written, code
    # A constant's name, a dict's item, a subscript's assignment.
    assert written["connection_disconnected"] == "connectors/source.py"
    assert written["method_not_allowed"] == "config/errors.py"
    assert written["poison"] == "pipeline/services/take_back.py"
    assert {"extract_memory_limit", "extract_time_limit", "extract_cpu_limit"} <= set(written)
    assert written["search_timeout"] == "retrieval/search.py"


@pytest.fixture(scope="module")
def schema():
    # As served: JSON, its statuses strings.
    return json.loads(json.dumps(api.get_openapi_schema(path_prefix="/api/v1/")))


def operations(schema):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def test_operations_have_stable_readable_ids_and_a_documented_tag(schema):
    tags = {tag["name"] for tag in TAGS}

    ids = {operation["operationId"] for _, operation in operations(schema)}

    assert ids == OPERATION_IDS
    for name, operation in operations(schema):
        assert len(operation["tags"]) == 1 and operation["tags"][0] in tags, name
        assert operation.get("summary"), name
    assert [tag["name"] for tag in schema["tags"]] == [tag["name"] for tag in TAGS]


def test_every_operation_declares_the_errors_any_request_can_get(schema):
    for name, operation in operations(schema):
        responses = operation["responses"]
        for status in ("400", "401", "429"):
            assert status in responses, f"{name} does not declare {status}"
        if operation.get("parameters") or operation.get("requestBody"):
            assert "422" in responses, f"{name} takes input but does not declare 422"


def test_every_error_answer_is_the_one_error_schema_with_an_example(schema):
    for name, operation in operations(schema):
        for status, response in operation["responses"].items():
            if int(status) < 400:
                continue
            media = response["content"]["application/json"]
            assert media["schema"] == {"$ref": "#/components/schemas/ErrorOut"}, (name, status)
            assert media["example"]["code"] in {code.value for code in ErrorCode}, (name, status)
            assert response["description"] not in {"", "Bad Request"}, (name, status)


def test_waits_and_redirects_declare_their_headers(schema):
    for name, operation in operations(schema):
        for status, response in operation["responses"].items():
            headers = response.get("headers", {})
            if status in {"429", "503"}:
                assert headers["Retry-After"]["schema"]["type"] == "integer", (name, status)
            if status == "401":
                assert "WWW-Authenticate" in headers, name
            if status == "302":
                assert headers["Location"]["required"], name


def test_the_download_is_one_binary_answer_a_generator_reads(schema):
    responses = schema["paths"]["/api/v1/documents/{document_id}/file"]["get"]["responses"]

    content = responses["200"]["content"]

    assert content["application/octet-stream"]["schema"] == {"type": "string", "format": "binary"}
    assert {media["schema"]["format"] for media in content.values()} == {"binary"}
    assert "Content-Disposition" in responses["200"]["headers"]


def test_every_field_a_success_body_always_has_is_required(schema):
    components = schema["components"]["schemas"]
    # The error's extra fields come with some errors only; the others named are requests.
    requests = {"UploadIn", "WebhookEndpointIn", "WebhookEndpointChange"}
    for name, component in components.items():
        if component.get("type") != "object" or name in {"ErrorOut", "FieldErrorOut", *requests}:
            continue
        properties = set(component.get("properties", {}))
        missing = properties - set(component.get("required", []))
        assert not missing, f"{name}: {missing} are always sent but not required"


def test_the_error_schema_requires_detail_and_code_and_nothing_is_nullable_in_it(schema):
    error = schema["components"]["schemas"]["ErrorOut"]

    assert error["required"] == ["detail", "code"]
    assert error["properties"]["code"] == {"$ref": "#/components/schemas/ErrorCode"}
    for field, spec in error["properties"].items():
        assert "null" not in str(spec) and "default" not in spec, field


def test_closed_sets_of_strings_are_enums(schema):
    components = schema["components"]["schemas"]

    def ref(component: str, field: str) -> str:
        spec = components[component]["properties"][field]
        spec = next((part for part in spec.get("anyOf", [spec]) if "$ref" in part), spec)
        return spec["$ref"].rsplit("/", 1)[-1]

    assert components[ref("RunOut", "status")]["enum"][-1] == "cancelled"
    for component, field in [
        ("RunOut", "stage"),
        ("RunOut", "source"),
        ("RunErrorOut", "code"),
        ("DocumentOut", "kind"),
        ("DocumentOut", "status"),
        ("SearchOut", "ranking"),
        ("TokenOut", "role"),
        ("ProgressOut", "unit"),
        ("ConnectorSourceOut", "provider"),
        ("AcceptOut", "status"),
    ]:
        assert components[ref(component, field)]["enum"], (component, field)


def test_every_bounded_input_declares_its_bounds(schema):
    for name, operation in operations(schema):
        for parameter in operation.get("parameters", []):
            spec = parameter["schema"]
            if spec.get("type") == "integer":
                assert "minimum" in spec and "maximum" in spec, (name, parameter["name"])
            if spec.get("type") == "string" and spec.get("format") != "uuid":
                assert "maxLength" in spec, (name, parameter["name"])
    upload = schema["components"]["schemas"]["UploadIn"]["properties"]
    assert upload["filename"]["maxLength"] == MAX_FILENAME_LENGTH
    assert upload["size_bytes"]["minimum"] == 0


def test_the_upload_requires_its_file_and_the_idempotency_key_is_not_nullable(schema):
    operation = schema["paths"]["/api/v1/documents"]["post"]

    body = operation["requestBody"]
    [key] = [p for p in operation["parameters"] if p["name"] == "Idempotency-Key"]

    assert body["required"] and body["content"]["multipart/form-data"]["schema"]["required"] == [
        "file"
    ]
    assert key["schema"]["type"] == "string" and "anyOf" not in key["schema"]
    assert (key["schema"]["minLength"], key["schema"]["maxLength"]) == (1, 255)


def test_servers_and_version_come_from_the_settings_and_the_contract(client):
    with override_settings(PAPERLANE_API_SERVERS=["https://paperlane.example.com"]):
        named = client.get("/api/v1/openapi.json").json()
    default = client.get("/api/v1/openapi.json").json()

    assert named["servers"] == [{"url": "https://paperlane.example.com"}]
    assert default["servers"] == [{"url": "/"}]
    assert default["info"]["version"].count(".") == 2


@pytest.mark.parametrize(
    "query, field",
    [("q=", "q"), ("q=a&limit=0", "limit"), ("q=a&limit=51", "limit"), ("q=" + "a" * 301, "q")],
)
def test_a_search_out_of_bounds_is_a_422(api, query, field):
    response = api.get(f"/api/v1/search?{query}")

    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"] == ["query", field]


def test_a_204_carries_no_content_type(api):
    run = accepted_run(api, make_pdf(1))

    response = api.delete(f"/api/v1/documents/{run.document_id}")

    assert response.status_code == 204 and response.content == b""
    assert "Content-Type" not in response.headers


@pytest.mark.django_db(transaction=True)
def test_a_succeeded_run_says_what_was_made_and_no_progress(api):
    run = accepted_run(api, make_pdf(3))
    drive(run.id)

    body = api.get(f"/api/v1/runs/{run.id}").json()

    assert body["status"] == "succeeded"
    assert body["progress"] is None and body["stage_attempts"] is None
    assert body["page_count"] == 3 and body["chunk_count"] >= 1
    assert body["attempts"] >= 3


def test_a_stage_that_counts_its_work_shows_its_progress_and_unit(api):
    run = accepted_run(api, make_pdf(1))
    ImportRun.objects.filter(id=run.id).update(
        status="processing", stage="embed", progress_done=3, progress_total=10, stage_attempts=1
    )

    body = api.get(f"/api/v1/runs/{run.id}").json()

    assert body["progress"] == {"done": 3, "total": 10, "unit": "chunks"}
    assert body["stage_attempts"] == 1


def test_a_field_a_direct_upload_does_not_have_is_a_422_not_ignored(api):
    body = {"filename": "a.pdf", "size_bytes": 10, "colour": "red"}

    response = api.post("/api/v1/uploads", body, content_type="application/json")

    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"] == ["body", "payload", "colour"]


def test_a_run_that_stopped_in_a_counting_stage_says_where(api):
    run = accepted_run(api, make_pdf(1))
    ImportRun.objects.filter(id=run.id).update(
        status="failed", stage="embed", progress_done=4, progress_total=9
    )

    body = api.get(f"/api/v1/runs/{run.id}").json()

    assert body["progress"] == {"done": 4, "total": 9, "unit": "chunks"}


def test_a_body_over_the_size_a_request_may_have_is_a_413_not_a_500(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = {"filename": "a.pdf", "size_bytes": 10, "content_type": "x" * 2000}

    response = api.post("/api/v1/uploads", body, content_type="application/json")

    assert response.status_code == 413, response.content
    assert response.json()["code"] == "body_too_large"


@pytest.mark.parametrize("method", ["put", "patch"])
def test_a_method_an_address_does_not_take_is_a_json_405(api, method):
    response = getattr(api, method)("/api/v1/documents")

    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    assert set(response["Allow"].replace(" ", "").split(",")) == {"GET", "POST"}


def test_a_run_error_code_no_enum_names_reads_as_unexpected_error(api, caplog):
    run = accepted_run(api, make_pdf(1))
    ImportRun.objects.filter(id=run.id).update(
        status="failed", error_code="from_an_old_release", error_message="It failed."
    )

    body = api.get(f"/api/v1/runs/{run.id}").json()

    assert body["error"] == {"code": "unexpected_error", "message": "It failed."}
    assert "from_an_old_release" in caplog.text
