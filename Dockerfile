# The Phrame project image: a venv with the project's wheels on a Debian bookworm base.
# Built by scripts/build-image, which makes the base with mmdebstrap (no registry needed) and
# the wheels with `pip wheel` on the host: nothing is downloaded inside the build.
ARG BASE=phrame/base:bookworm
FROM ${BASE}

# A fixed uid so bind-mounted state and repositories can be given to it
# (scripts/config-repo-init, scripts/compose-secrets; docs/operations/production.md).
RUN groupadd --system --gid 10001 phrame \
 && useradd --system --uid 10001 --gid phrame --home-dir /var/lib/phrame --create-home \
      --shell /usr/sbin/nologin phrame

COPY wheels/ /tmp/wheels/
RUN python3 -m venv /opt/phrame \
 && /opt/phrame/bin/pip install --no-index --find-links /tmp/wheels --no-cache-dir \
      --disable-pip-version-check --quiet phrame-gitops \
 && rm -rf /tmp/wheels

ENV PATH=/opt/phrame/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PHRAME_STATE_DIR=/var/lib/phrame \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER phrame
WORKDIR /var/lib/phrame
ENTRYPOINT ["phrame"]
CMD ["--help"]
