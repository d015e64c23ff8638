{{/* Names and labels shared by every object of the chart. */}}

{{- define "kfed-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kfed-agent.fullname" -}}
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

{{- define "kfed-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kfed-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kfed-agent.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kfed-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kfed
{{- end -}}

{{- define "kfed-agent.labels" -}}
{{ include "kfed-agent.commonLabels" . }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "kfed-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kfed-agent.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kfed-agent.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- /* This worker's name as the manager knows it (its MultiKueueCluster's name); defaults to the release name. */ -}}
{{- define "kfed-agent.clusterName" -}}
{{- default .Release.Name .Values.clusterName -}}
{{- end -}}

{{- define "kfed-agent.managerAccessName" -}}
{{- .Values.managerAccess.serviceAccountName -}}
{{- end -}}
