#!/usr/bin/env python3
"""Prints template.yaml after SAM's transform, as CloudFormation JSON, offline.

    .venv/bin/python scripts/sam-transform.py [TEMPLATE] > transformed.json

What SAM adds by itself (the generated roles and the managed policies it attaches, the event
source mappings, the API's stage) is only visible after the transform, so the template tests in
shared/testkit/tests/sam_transformed.rs read this output, not the YAML text. The transform is
aws-sam-translator (pinned in requirements-tools.txt, the version the SAM CLI uses) run as a
library: no AWS call. Two things would otherwise reach AWS or the file system, and are replaced:
each function's local CodeUri becomes an s3:// URI (the transform only checks that it is one), and
the managed-policy loader, which lists IAM's policies to resolve policy *names*, answers with an
empty map (the template names no managed policy; SAM's own attachments are ARNs).

Exit codes: 0 printed, 2 the template could not be read or transformed (the reason on stderr).
"""

import json
import os
import sys


class OfflinePolicyLoader:
    """The managed-policy loader of the transform, without IAM: no policy names are known."""

    def load(self):
        return {}


def main(argv):
    path = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "template.yaml")
    # The transform builds ARNs with the partition of the region; no credentials are needed.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    try:
        from samtranslator.translator.transform import transform
        from samtranslator.yaml_helper import yaml_parse
    except ImportError as error:
        print(f"sam-transform: aws-sam-translator is not installed ({error}); run scripts/tools.sh", file=sys.stderr)
        return 2
    try:
        with open(path, encoding="utf-8") as f:
            template = yaml_parse(f.read())
        for logical_id, resource in template.get("Resources", {}).items():
            if resource.get("Type") == "AWS::Serverless::Function":
                resource.setdefault("Properties", {})["CodeUri"] = f"s3://offline-transform/{logical_id}.zip"
        transformed = transform(template, {}, OfflinePolicyLoader())
    except Exception as error:  # the translator raises several kinds; all mean "not transformed"
        print(f"sam-transform: {path}: {error}", file=sys.stderr)
        return 2
    json.dump(transformed, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
