package harmony

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// This file turns a tool's JSON Schema into the TypeScript-like declaration
// gpt-oss was trained on, e.g.
//
//	type get_weather = (_: {
//	// The city
//	location: string,
//	unit?: "c" | "f", // default: c
//	}) => any;
//
// The layout, including its oddities (an object's description printed both
// above the property and inside the type, nested members indented by four
// spaces, non-string enums dropped to their base type), follows the
// reference renderer exactly, because the model saw exactly that text.

// jsonKind is the kind of a decoded JSON value.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is a decoded JSON value that, unlike map[string]any, remembers the
// order of object keys: properties render in the order they were written.
type jsonValue struct {
	kind  jsonKind
	str   string // string value, or the number's literal
	b     bool
	keys  []string
	vals  []*jsonValue // object values (parallel to keys) or array items
	index map[string]int
}

// get returns an object member, or nil if v is not an object or lacks key.
func (v *jsonValue) get(key string) *jsonValue {
	if v == nil || v.kind != jsonObject {
		return nil
	}
	if i, ok := v.index[key]; ok {
		return v.vals[i]
	}
	return nil
}

// getString returns an object member that is a string.
func (v *jsonValue) getString(key string) (string, bool) {
	m := v.get(key)
	if m == nil || m.kind != jsonString {
		return "", false
	}
	return m.str, true
}

// getArray returns an object member that is an array.
func (v *jsonValue) getArray(key string) ([]*jsonValue, bool) {
	m := v.get(key)
	if m == nil || m.kind != jsonArray {
		return nil, false
	}
	return m.vals, true
}

// parseOrderedJSON decodes data keeping object key order. A repeated key
// keeps its first position and its last value, as serde_json's
// order-preserving map does.
func parseOrderedJSON(data []byte) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("harmony: trailing data after JSON schema")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (*jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jsonValue{kind: jsonNull}, nil
	case bool:
		return &jsonValue{kind: jsonBool, b: t}, nil
	case json.Number:
		return &jsonValue{kind: jsonNumber, str: string(t)}, nil
	case string:
		return &jsonValue{kind: jsonString, str: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := &jsonValue{kind: jsonArray}
			for dec.More() {
				item, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				v.vals = append(v.vals, item)
			}
			_, err := dec.Token() // ']'
			return v, err
		case '{':
			v := &jsonValue{kind: jsonObject, index: map[string]int{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				val, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				if i, ok := v.index[key]; ok {
					v.vals[i] = val
					continue
				}
				v.index[key] = len(v.keys)
				v.keys = append(v.keys, key)
				v.vals = append(v.vals, val)
			}
			_, err := dec.Token() // '}'
			return v, err
		}
	}
	return nil, fmt.Errorf("harmony: unexpected JSON token %v", tok)
}

// display writes v compactly, the way serde_json's Display does: used for
// non-string defaults ("// default: 10", "// default: null").
func (v *jsonValue) display(b *strings.Builder) {
	switch v.kind {
	case jsonNull:
		b.WriteString("null")
	case jsonBool:
		b.WriteString(strconv.FormatBool(v.b))
	case jsonNumber:
		b.WriteString(displayNumber(v.str))
	case jsonString:
		writeJSONString(b, v.str)
	case jsonArray:
		b.WriteByte('[')
		for i, item := range v.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			item.display(b)
		}
		b.WriteByte(']')
	case jsonObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			v.vals[i].display(b)
		}
		b.WriteByte('}')
	}
}

func (v *jsonValue) displayString() string {
	var b strings.Builder
	v.display(&b)
	return b.String()
}

// displayNumber normalises a JSON number literal as serde_json would print
// it: integers that fit 64 bits stay as written; anything else is a float in
// the shortest form, with ".0" on whole numbers and an exponent outside
// [1e-5, 1e16).
func displayNumber(lit string) string {
	if _, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return lit
	}
	if _, err := strconv.ParseUint(lit, 10, 64); err == nil {
		return lit
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return lit
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// Shortest digits and decimal exponent: f = 0.DIGITS * 10^point.
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	point := x + 1
	switch {
	case point > 0 && point <= 16:
		if len(digits) <= point {
			return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
		}
		return sign + digits[:point] + "." + digits[point:]
	case point <= 0 && point > -5:
		return sign + "0." + strings.Repeat("0", -point) + digits
	default:
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		return sign + m + "e" + strconv.Itoa(point-1)
	}
}

// writeJSONString quotes s as serde_json does: only '"', '\\' and control
// characters are escaped; non-ASCII and '<', '>', '&' are written as is.
func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// isEnum reports whether schema has a non-empty "enum" array.
func isEnum(schema *jsonValue) bool {
	arr, ok := schema.getArray("enum")
	return ok && len(arr) > 0
}

// defaultComment formats a default value the way the reference does: a
// string is quoted (without escaping) unless the schema is an enum, where
// it is bare; other values use their JSON form.
func defaultComment(schema, def *jsonValue) string {
	if def.kind == jsonString {
		if isEnum(schema) {
			return "default: " + def.str
		}
		return `default: "` + def.str + `"`
	}
	return "default: " + def.displayString()
}

// isNullable reports "nullable": true.
func isNullable(schema *jsonValue) bool {
	n := schema.get("nullable")
	return n != nil && n.kind == jsonBool && n.b
}

// addNull appends " | null" for nullable schemas whose type does not
// already mention null.
func addNull(schema *jsonValue, ts string) string {
	if isNullable(schema) && !strings.Contains(ts, "null") {
		return ts + " | null"
	}
	return ts
}

// SchemaToTypeScript renders a JSON Schema as the TypeScript-like type used
// in tool declarations, as for the parameters of a tool.
func SchemaToTypeScript(schema json.RawMessage) (string, error) {
	v, err := parseOrderedJSON(schema)
	if err != nil {
		return "", err
	}
	return schemaToTS(v, ""), nil
}

// schemaToTS renders one schema; indent prefixes the lines of nested
// objects.
func schemaToTS(schema *jsonValue, indent string) string {
	if variants, ok := schema.getArray("oneOf"); ok {
		return oneOfToTS(variants, indent)
	}
	if types, ok := schema.getArray("type"); ok {
		var names []string
		for _, t := range types {
			if t.kind != jsonString {
				continue
			}
			if t.str == "integer" {
				names = append(names, "number")
			} else {
				names = append(names, t.str)
			}
		}
		if len(names) > 0 {
			return strings.Join(names, " | ")
		}
	}
	typ, ok := schema.getString("type")
	if !ok {
		// Without a usable type (anyOf, allOf, $ref, ...) the model is
		// told "any".
		return "any"
	}
	switch typ {
	case "object":
		return objectToTS(schema, indent)
	case "string":
		if vals, ok := schema.getArray("enum"); ok {
			var quoted []string
			for _, e := range vals {
				if e.kind == jsonString {
					quoted = append(quoted, `"`+e.str+`"`)
				}
			}
			if len(quoted) > 0 {
				return strings.Join(quoted, " | ")
			}
		}
		return "string"
	case "number", "integer":
		return "number"
	case "boolean":
		return "boolean"
	case "array":
		if items := schema.get("items"); items != nil {
			return schemaToTS(items, indent) + "[]"
		}
		return "Array<any>"
	}
	return "any"
}

// oneOfToTS renders a oneOf that is not a property of an object: each
// variant on its own line, with its description and default as a trailing
// comment.
func oneOfToTS(variants []*jsonValue, indent string) string {
	var b strings.Builder
	for _, variant := range variants {
		b.WriteString("\n" + indent + " | ")
		b.WriteString(addNull(variant, schemaToTS(variant, indent+"   ")))
		var comments []string
		if d, ok := variant.getString("description"); ok {
			comments = append(comments, d)
		}
		if def := variant.get("default"); def != nil {
			if def.kind == jsonString && !isEnum(variant) {
				comments = append(comments, `default: "`+def.str+`"`)
			} else {
				comments = append(comments, "default: "+def.displayString())
			}
		}
		if len(comments) > 0 {
			b.WriteString(" // " + strings.Join(comments, " "))
		}
	}
	return b.String()
}

// objectToTS renders an object type with one member per line.
func objectToTS(schema *jsonValue, indent string) string {
	var b strings.Builder
	if d, ok := schema.getString("description"); ok {
		b.WriteString(indent + "// " + d + "\n")
	}
	b.WriteString("{\n")
	props := schema.get("properties")
	if props != nil && props.kind == jsonObject {
		required := map[string]bool{}
		if req, ok := schema.getArray("required"); ok {
			for _, r := range req {
				if r.kind == jsonString {
					required[r.str] = true
				}
			}
		}
		for i, key := range props.keys {
			propertyToTS(&b, key, props.vals[i], required[key], indent)
		}
	}
	b.WriteString(indent + "}")
	return b.String()
}

// propertyToTS renders one member of an object, with its comments.
func propertyToTS(b *strings.Builder, key string, val *jsonValue, required bool, indent string) {
	optional := "?"
	if required {
		optional = ""
	}
	if title, ok := val.getString("title"); ok {
		b.WriteString(indent + "// " + title + "\n" + indent + "//\n")
	}
	hasOneOf := val.get("oneOf") != nil
	if !hasOneOf {
		if d, ok := val.getString("description"); ok {
			b.WriteString(indent + "// " + d + "\n")
		}
	}
	if examples, ok := val.getArray("examples"); ok && len(examples) > 0 {
		b.WriteString(indent + "// Examples:\n")
		for _, ex := range examples {
			if ex.kind == jsonString {
				b.WriteString(indent + `// - "` + ex.str + `"` + "\n")
			}
		}
	}

	if variants, ok := val.getArray("oneOf"); ok {
		// The property's description goes above the name unless the first
		// variant repeats it, in which case that variant's comment carries
		// it instead.
		propDesc, hasPropDesc := val.getString("description")
		if hasPropDesc && len(variants) > 0 {
			if first, ok := variants[0].getString("description"); ok && first == propDesc {
				hasPropDesc = false
			}
		}
		descAbove := false
		if hasPropDesc {
			b.WriteString(indent + "// " + propDesc + "\n")
			descAbove = true
		}
		// Keep comparing variant descriptions with the property's own, even
		// when it was not printed above.
		propDesc, hasPropDescRaw := val.getString("description")
		if def := val.get("default"); def != nil {
			b.WriteString(indent + "// " + defaultComment(val, def) + "\n")
		}
		b.WriteString(indent + key + optional + ":\n")
		for i, variant := range variants {
			b.WriteString(indent + " | ")
			b.WriteString(addNull(variant, schemaToTS(variant, indent+"   ")))
			var comments []string
			if !(i == 0 && descAbove) {
				if d, ok := variant.getString("description"); ok && !(hasPropDescRaw && d == propDesc) {
					comments = append(comments, d)
				}
			}
			if def := variant.get("default"); def != nil {
				comments = append(comments, defaultComment(variant, def))
			}
			if len(comments) > 0 {
				b.WriteString(" // " + strings.Join(comments, " "))
			}
			b.WriteString("\n")
		}
		b.WriteString(indent + ",\n")
		return
	}

	b.WriteString(indent + key + optional + ": ")
	b.WriteString(addNull(val, schemaToTS(val, indent+"    ")))
	b.WriteString(",")
	if !hasOneOf {
		if def := val.get("default"); def != nil {
			b.WriteString(" // " + defaultComment(val, def))
		}
	}
	b.WriteString("\n")
}
