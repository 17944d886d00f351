package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ProviderOptions configure NewProvider.
type ProviderOptions struct {
	// Endpoint is the OTLP/HTTP collector's base URL
	// (http://collector:4318); spans go to its /v1/traces unless the URL
	// has a path of its own. Empty: the exporter reads the standard
	// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables.
	Endpoint string
	// SampleRatio, when in [0, 1], samples that share of new traces and
	// follows the parent's decision otherwise. Negative: the SDK reads
	// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default: always,
	// parent-based).
	SampleRatio float64
	// ServiceName is the service.name resource attribute unless
	// OTEL_SERVICE_NAME says otherwise (default "loom").
	ServiceName string
	// Version is the service.version resource attribute.
	Version string
	// Logger receives the exporter's failures, which never fail a request.
	Logger *slog.Logger
}

// NewProvider returns a tracer provider that batches spans and exports
// them over OTLP/HTTP. Export runs in the background: a slow or dead
// collector costs dropped spans (logged), never a failed or slower
// request. Shut it down to flush what is queued.
func NewProvider(ctx context.Context, opts *ProviderOptions) (*sdktrace.TracerProvider, error) {
	var o ProviderOptions
	if opts != nil {
		o = *opts
	}
	if o.ServiceName == "" {
		o.ServiceName = "loom"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var expOpts []otlptracehttp.Option
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("OTLP endpoint %q is not an http(s) URL", o.Endpoint)
		}
		if strings.Trim(u.Path, "/") == "" {
			u.Path = "/v1/traces"
		}
		expOpts = append(expOpts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exp, err := otlptracehttp.New(ctx, expOpts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	// Later resources win: loom's name and version over the SDK's
	// defaults, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over both.
	res := resource.Default()
	for _, r := range []*resource.Resource{
		resource.NewSchemaless(attribute.String("service.name", o.ServiceName), attribute.String("service.version", o.Version)),
		envResource(ctx),
	} {
		if merged, err := resource.Merge(res, r); err == nil {
			res = merged
		}
	}
	popts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if o.SampleRatio >= 0 {
		popts = append(popts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(min(o.SampleRatio, 1)))))
	}
	logger := o.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: span export failed (requests are not affected)", "err", err)
	}))
	return sdktrace.NewTracerProvider(popts...), nil
}

func envResource(ctx context.Context) *resource.Resource {
	r, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		return resource.Empty()
	}
	return r
}
