package upstream

import (
	"encoding/json"
	"math"
	"testing"
)

// AppendFloat writes a float64 as encoding/json does, byte for byte.
func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.95, 1.5, -2.25, 1e-6, 9.99e-7, 1e-7, 1.5e-10,
		123456789, 1e20, 1e21, 1.2345e22, -3e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, 1.0 / 3} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendFloat(nil, f); string(got) != string(want) {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
}

// Extra replaces a key the body would write, is added when new, and is
// dropped for a protected key; the body stays one valid object.
func TestBodyExtra(t *testing.T) {
	w := NewBody(0, map[string]json.RawMessage{"b": json.RawMessage(`2`), "p": json.RawMessage(`"no"`), `q"k`: json.RawMessage(`[1]`)},
		map[string]bool{"p": true})
	w.String("p", "kept")
	w.Int("b", 1)
	w.Bool("c", true)
	got, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"p":"kept","c":true,"b":2,"q\"k":[1]}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
