# pleg_exporter image, built offline from the static binary of `make build`
# (CGO_ENABLED=0): no base image is pulled. `make image` prepares the context.
FROM scratch
ARG VERSION=unknown
LABEL org.opencontainers.image.title="pleg_exporter" \
      org.opencontainers.image.description="Warns before a Kubernetes node turns NotReady with 'PLEG is not healthy'" \
      org.opencontainers.image.source="https://github.com/pleg-exporter/pleg_exporter" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY pleg_exporter /bin/pleg_exporter
COPY .build/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# Non-root by default; the DaemonSet runs it as uid 0 with every capability
# dropped where the runtime socket is root-only (see deploy/kubernetes).
USER 65534:65534
EXPOSE 10391
ENTRYPOINT ["/bin/pleg_exporter"]
