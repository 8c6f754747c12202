# Debian's mosquitto laid out as the eclipse-mosquitto image is (config in /mosquitto/config,
# data in /mosquitto/data owned by the mosquitto user, uid and gid 1883 as there, so one
# `chown 1883` of server.key and passwd serves both images), for hosts with no registry to
# pull eclipse-mosquitto from. Built by scripts/build-image as phrame/mosquitto:local.
ARG BASE=phrame/base:bookworm
FROM ${BASE}
RUN groupmod --gid 1883 mosquitto \
 && usermod --uid 1883 --gid 1883 mosquitto \
 && mkdir -p /mosquitto/config /mosquitto/data /mosquitto/certs /mosquitto/log \
 && chown -R mosquitto:mosquitto /mosquitto/data /mosquitto/log /var/lib/mosquitto \
 && if [ -d /var/log/mosquitto ]; then chown -R mosquitto:mosquitto /var/log/mosquitto; fi
# Started as root, mosquitto opens its listeners and then runs as the user mosquitto, which
# must be able to read the key, the passwd file and the ACL.
ENTRYPOINT ["/usr/sbin/mosquitto"]
CMD ["-c", "/mosquitto/config/mosquitto.conf"]
