"""Secret settings are redacted wherever settings are recorded; the local session defaults keep
every endpoint on loopback and the UI off; ``--ui`` turns it on."""

from __future__ import annotations

import re

import pytest

from neardup_spark.cli.options import CliParser, add_settings_options
from neardup_spark.config import load_settings
from neardup_spark.errors import UserError
from neardup_spark.redaction import (
    REDACTED,
    SPARK_REDACTION_REGEX,
    is_secret,
    redact_settings,
)
from neardup_spark.runtime.session import LOCAL_DEFAULTS, LOOPBACK_ENV, STARTED_JVM_DEFAULTS


@pytest.mark.parametrize(
    "name",
    [
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.ssl.keyPassword",
        "spark.authenticate.secret",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.hadoop.fs.s3a.session.TOKEN",
        "spark.hadoop.google.cloud.auth.service.account.json.credential",
        "spark.hadoop.javax.jdo.option.ConnectionPassword",
    ],
)
def test_secret_names_are_redacted_here_and_by_spark(name):
    assert is_secret(name)
    assert redact_settings({name: "v"}) == {name: REDACTED}
    assert re.search(SPARK_REDACTION_REGEX.removeprefix("(?i)"), name, re.IGNORECASE)


def test_other_settings_are_kept_and_secret_values_hidden():
    settings = {
        "spark.driver.memory": "4g",
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.extraJavaOptions": "-Dfs.s3a.secret.key=XYZ",
        "nested": {"password": "p", "plain": 1},
    }
    assert redact_settings(settings) == {
        "spark.driver.memory": "4g",
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.extraJavaOptions": REDACTED,
        "nested": {"password": REDACTED, "plain": 1},
    }


def test_session_settings_record_secrets_redacted_and_keep_them_for_spark(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("spark:\n  spark.hadoop.javax.jdo.option.ConnectionPassword: PW1\n")
    job = load_settings(
        [str(config)], ["spark.hadoop.fs.s3a.secret.key=XYZ", "spark.driver.memory=3g"]
    )
    assert job.session.spark["spark.hadoop.fs.s3a.secret.key"] == "XYZ"  # what Spark gets
    recorded = job.to_dict()["spark"]
    assert recorded == {
        "spark.hadoop.javax.jdo.option.ConnectionPassword": REDACTED,
        "spark.hadoop.fs.s3a.secret.key": REDACTED,
        "spark.driver.memory": "3g",
    }
    assert "XYZ" not in repr(job.to_dict()) and "PW1" not in repr(job.session.to_dict())


def test_a_bad_override_does_not_echo_a_secret():
    with pytest.raises(UserError) as caught:
        load_settings(None, ["normalize.secret_token=XYZ"])
    assert "XYZ" not in str(caught.value) and REDACTED in str(caught.value)


def test_local_mode_binds_to_loopback_without_a_ui():
    assert LOCAL_DEFAULTS["spark.driver.bindAddress"] == "127.0.0.1"
    assert LOCAL_DEFAULTS["spark.driver.host"] == "127.0.0.1"
    assert LOCAL_DEFAULTS["spark.ui.enabled"] == "false"
    assert LOOPBACK_ENV == {"SPARK_LOCAL_IP": "127.0.0.1"}  # where Spark binds its UI
    assert STARTED_JVM_DEFAULTS["spark.redaction.regex"] == SPARK_REDACTION_REGEX


def test_ui_option_turns_the_ui_on():
    parser = CliParser()
    add_settings_options(parser)
    args = parser.parse_args(["--set", "spark.driver.memory=3g", "--ui"])
    assert args.overrides == ["spark.driver.memory=3g", "spark.ui.enabled=true"]
    assert parser.parse_args([]).overrides == []
    assert load_settings(None, args.overrides).session.spark["spark.ui.enabled"] == "true"
