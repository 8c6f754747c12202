# Debian's mosquitto laid out as the eclipse-mosquitto image is (config in /mosquitto/config,
# data in /mosquitto/data owned by the mosquitto user), for hosts with no registry to pull
# eclipse-mosquitto from. Built by scripts/build-image as phrame/mosquitto:local.
ARG BASE=phrame/base:bookworm
FROM ${BASE}
RUN mkdir -p /mosquitto/config /mosquitto/data /mosquitto/certs /mosquitto/log \
 && chown mosquitto:mosquitto /mosquitto/data /mosquitto/log
# Started as root, mosquitto opens its listeners and then runs as the user mosquitto.
ENTRYPOINT ["/usr/sbin/mosquitto"]
CMD ["-c", "/mosquitto/config/mosquitto.conf"]
