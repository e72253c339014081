"""Documents stored in S3 (moto's S3 server on a loopback port)."""

import pytest
from botocore.config import Config
from django.core.files.storage import default_storage, storages

from documents.models import Document
from documents.storage import storage_open, stored_keys
from pipeline.models import ImportRun
from tests.support.files import HTML_AS_PDF, make_pdf
from tests.support.silent import silent_server
from tests.support.storage import KEYS, storage_exists, store_keys
from tests.support.uploads import upload


def _keys(s3) -> list[str]:
    listing = s3.client.list_objects_v2(Bucket=s3.bucket)
    return [o["Key"] for o in listing.get("Contents", [])]


@pytest.mark.django_db
def test_an_accepted_upload_is_stored_in_s3_at_its_stable_key(s3, api):
    pdf = make_pdf(3)

    response = upload(api, pdf, name="s3.pdf")

    assert response.status_code == 202, response.content
    document = ImportRun.objects.get(id=response.json()["run_id"]).document
    assert _keys(s3) == [document.storage_key]
    assert storage_exists(key=document.storage_key)
    with storage_open(key=document.storage_key) as fh:
        assert fh.read() == pdf


@pytest.mark.slow
@pytest.mark.django_db
def test_an_upload_s3_does_not_answer_is_a_503_to_send_again_and_keeps_nothing(
    s3, api, org, settings
):
    with silent_server() as port:
        settings.AWS_S3_ENDPOINT_URL = f"http://127.0.0.1:{port}"
        settings.AWS_S3_CLIENT_CONFIG = Config(
            connect_timeout=0.5, read_timeout=0.5, retries={"max_attempts": 1}
        )
        storages._storages.pop("default", None)

        response = upload(api, make_pdf(1))

    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "60" and response.json()["code"] == "storage_unavailable"
    assert not Document.objects.exists() and not ImportRun.objects.exists()
    org.refresh_from_db()
    assert org.pages_reserved == 0


@pytest.mark.django_db
def test_a_refused_upload_leaves_no_object_in_s3(s3, api, org):
    org.page_limit = 1
    org.save(update_fields=["page_limit"])

    over_quota = upload(api, make_pdf(2))
    wrong_type = upload(api, HTML_AS_PDF)

    assert (over_quota.status_code, wrong_type.status_code) == (402, 415)
    assert _keys(s3) == []


@pytest.mark.parametrize("location", ["", "media"])
def test_keys_are_listed_flat_in_key_order_after_the_resume_point(s3, settings, location):
    settings.AWS_LOCATION = location
    storages._storages.pop("default", None)
    store_keys(KEYS)

    for after in ["", "top/a-b", "top/a/b/cc", "top/a/z", "top/b/c"]:
        assert list(stored_keys(under="top", after=after)) == [k for k in KEYS if k > after]
    prefix = f"{location}/" if location else ""
    assert sorted(_keys(s3)) == [prefix + key for key in KEYS]


@pytest.mark.slow
def test_listing_a_large_folder_costs_one_request_per_thousand_keys(s3):
    client = s3.client
    for n in range(1200):
        client.put_object(Bucket=s3.bucket, Key=f"top/{n:05d}/v1/original.pdf", Body=b"x")
    requests = []
    default_storage.connection.meta.client.meta.events.register(
        "before-call.s3", lambda model, **_: requests.append(model.name)
    )

    keys = list(stored_keys(under="top", after="top/00099/v1/original.pdf"))

    assert len(keys) == 1100 and keys[0] == "top/00100/v1/original.pdf"
    assert requests == ["ListObjectsV2", "ListObjectsV2"]
