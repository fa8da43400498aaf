{{- define "scw-lb-ipam.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of every object: the release name, with the chart's name
unless it already contains it; fullnameOverride replaces it. */}}
{{- define "scw-lb-ipam.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "scw-lb-ipam.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "scw-lb-ipam.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository@digest when a digest is given, else repository:tag. */}}
{{- define "scw-lb-ipam.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{- define "scw-lb-ipam.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{ include "scw-lb-ipam.selectorLabels" . }}
{{- end -}}

{{- define "scw-lb-ipam.selectorLabels" -}}
app.kubernetes.io/name: {{ include "scw-lb-ipam.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "scw-lb-ipam.secretName" -}}
{{- default (printf "%s-scaleway" (include "scw-lb-ipam.fullname" .)) .Values.scaleway.existingSecret -}}
{{- end -}}

{{- define "scw-lb-ipam.tlsSecretName" -}}
{{- printf "%s-tls" (include "scw-lb-ipam.fullname" .) -}}
{{- end -}}

{{/* Where the pods mount the API key of the credentials Secret. */}}
{{- define "scw-lb-ipam.keyDir" -}}
/var/run/scw-lb-ipam/scaleway
{{- end -}}

{{/* Where the pods mount the pool file's ConfigMap. */}}
{{- define "scw-lb-ipam.configDir" -}}
/etc/scw-lb-ipam
{{- end -}}

{{/* The container's environment: its namespace, the API endpoint, extraEnv
and the Scaleway credentials Secret. The Deployment and the preflight test Pod
share it, so that helm test checks the credentials the webhook runs with. */}}
{{- define "scw-lb-ipam.containerEnv" -}}
env:
  - name: POD_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
  {{- with .Values.scaleway.apiURL }}
  - name: SCW_API_URL
    value: {{ . | quote }}
  {{- end }}
  {{- with .Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
envFrom:
  # SCW_ACCESS_KEY, SCW_SECRET_KEY, SCW_DEFAULT_PROJECT_ID, SCW_DEFAULT_REGION
  - secretRef:
      name: {{ include "scw-lb-ipam.secretName" . }}
{{- end -}}

{{/* The pool file's ConfigMap: the volume, and its mount in a container. */}}
{{- define "scw-lb-ipam.configVolume" -}}
- name: config
  configMap:
    name: {{ include "scw-lb-ipam.fullname" . }}
{{- end -}}

{{- define "scw-lb-ipam.configVolumeMount" -}}
- name: config
  mountPath: {{ include "scw-lb-ipam.configDir" . }}
  readOnly: true
{{- end -}}

{{/* Fail fast on combinations the schema cannot express. */}}
{{- define "scw-lb-ipam.validate" -}}
{{- if not .Values.config.clusterName -}}
{{- fail "config.clusterName is required: a name unique among the clusters sharing the Private Networks, e.g. prod-par" -}}
{{- end -}}
{{- if not .Values.config.clusterPrivateNetworkID -}}
{{- fail "config.clusterPrivateNetworkID is required: the nodes' Private Network (the CCM's PN_ID)" -}}
{{- end -}}
{{- if not .Values.config.pools -}}
{{- fail "config.pools needs at least one pool" -}}
{{- end -}}
{{- if and (not .Values.scaleway.existingSecret) (or (not .Values.scaleway.accessKey) (not .Values.scaleway.secretKey)) -}}
{{- fail "set scaleway.existingSecret (a Secret in the release namespace with SCW_ACCESS_KEY, SCW_SECRET_KEY, SCW_DEFAULT_PROJECT_ID and SCW_DEFAULT_REGION; see docs/install.md) or scaleway.accessKey and scaleway.secretKey" -}}
{{- end -}}
{{- if and .Values.scaleway.existingSecret (or .Values.scaleway.accessKey .Values.scaleway.secretKey) -}}
{{- fail "scaleway.existingSecret and scaleway.accessKey/secretKey are mutually exclusive: use one" -}}
{{- end -}}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.create is false: set serviceAccount.name to the existing ServiceAccount the pods run as" -}}
{{- end -}}
{{- if or (eq (int .Values.metrics.port) (int .Values.webhook.port)) (eq (int .Values.metrics.port) 8081) -}}
{{- fail (printf "metrics.port %v is taken: the webhook listens on webhook.port (%v) and the probes on 8081" .Values.metrics.port .Values.webhook.port) -}}
{{- end -}}
{{- end -}}
