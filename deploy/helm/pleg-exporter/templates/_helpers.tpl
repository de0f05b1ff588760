{{/*
The objects' name: fullnameOverride, else the release's name where it already says pleg-exporter, else
<release>-pleg-exporter; at most 63 characters (a label value).
*/}}
{{- define "pleg-exporter.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
The pods' selector. app.kubernetes.io/name is always pleg-exporter: the PodMonitor and the ServiceMonitor
take the job label from it, and the mixin's alerts select job="pleg-exporter".
*/}}
{{- define "pleg-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pleg-exporter.labels" -}}
{{ include "pleg-exporter.selectorLabels" . }}
app.kubernetes.io/component: exporter
app.kubernetes.io/part-of: pleg-exporter
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Labels of the objects the Prometheus Operator selects: monitoringLabels, then the object's own. */}}
{{- define "pleg-exporter.monitoringLabels" -}}
{{- $labels := merge (deepCopy (.extra | default dict)) (deepCopy (.root.Values.monitoringLabels | default dict)) -}}
{{- with $labels -}}
{{ toYaml . }}
{{- end -}}
{{- end -}}

{{- define "pleg-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "pleg-exporter.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "pleg-exporter.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
The runtime profile, resolved: the CRI socket on the node, Docker's socket (cri-dockerd only, else
empty) and the one directory that holds them, which is what is mounted. The same sockets and the same
directories as deploy/kubernetes/overlays. Values the schema cannot judge fail here, with the reason.
*/}}
{{- define "pleg-exporter.runtime" -}}
{{- $r := .Values.runtime -}}
{{- $defaults := dict "containerd" "/run/containerd/containerd.sock" "crio" "/var/run/crio/crio.sock" "cri-dockerd" "/var/run/cri-dockerd.sock" -}}
{{- if not (hasKey $defaults $r.profile) -}}
{{- fail (printf "runtime.profile %q: want containerd, crio or cri-dockerd" $r.profile) -}}
{{- end -}}
{{- $socket := $r.socket | default (get $defaults $r.profile) -}}
{{- include "pleg-exporter.socketPath" (list "runtime.socket" $socket) -}}
{{- $docker := "" -}}
{{- if eq $r.profile "cri-dockerd" -}}
{{- $docker = $r.dockerSocket | default "/var/run/docker.sock" -}}
{{- include "pleg-exporter.socketPath" (list "runtime.dockerSocket" $docker) -}}
{{- if eq $docker $socket -}}
{{- fail (printf "runtime.dockerSocket %s is the CRI socket: Docker's own socket is another (default /var/run/docker.sock)" $docker) -}}
{{- end -}}
{{- if ne (dir $docker) (dir $socket) -}}
{{- fail (printf "runtime.dockerSocket %s is not in the directory of the CRI socket %s: both are read through one read-only mount of %s" $docker $socket (dir $socket)) -}}
{{- end -}}
{{- else if $r.dockerSocket -}}
{{- fail (printf "runtime.dockerSocket is read only with runtime.profile cri-dockerd, not %s" $r.profile) -}}
{{- end -}}
{{- toJson (dict "socket" $socket "docker" $docker "dir" (dir $socket)) -}}
{{- end -}}

{{/* Fails unless (list key path) names a socket by its clean absolute path, in a directory below /. */}}
{{- define "pleg-exporter.socketPath" -}}
{{- $key := index . 0 -}}
{{- $path := index . 1 -}}
{{- if or (not (isAbs $path)) (ne (clean $path) $path) (eq (dir $path) "/") -}}
{{- fail (printf "%s %q: want the socket's clean absolute path, in a directory below /" $key $path) -}}
{{- end -}}
{{- end -}}

{{/*
Flags the chart sets or cannot support, and why: extraArgs may not carry them. The value is what to do
instead.
*/}}
{{- define "pleg-exporter.ownFlags" -}}
{{- toJson (dict
  "--runtime.endpoint" "set runtime.profile or runtime.socket"
  "--runtime" "the chart relists through the CRI socket of runtime.profile"
  "--pleg.threshold" "set plegThreshold"
  "--docker.host" "set runtime.profile=cri-dockerd and runtime.dockerSocket"
  "--web.listen-address" "the pod listens on its own address, port 10391"
  "--web.systemd-socket" "the pod listens on its own address, port 10391"
  "--web.telemetry-path" "the PodMonitor and the ServiceMonitor scrape /metrics"
  "--web.config.file" "the probes and the monitors speak plain HTTP; TLS is not supported by the chart") -}}
{{- end -}}
