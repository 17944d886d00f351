package tenant

import "context"

type key struct{}

// With returns ctx carrying tenant id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From returns the tenant of ctx ("" for the anonymous tenant).
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}
