package responses

import "strings"

// validateMedia checks the shape of an input_image or input_file part:
// what it points at, not whether it can be fetched or read (the Engine's
// checks). loom has no Files API, so file ids are refused.
func (p *ContentPart) validateMedia(param string) *APIError {
	switch p.Type {
	case PartInputImage:
		switch p.MediaFields().Detail {
		case "", "auto", "low", "high":
		default:
			return BadRequest(param+".detail", "detail must be auto, low or high")
		}
		if p.MediaFields().FileID != "" {
			return Unsupported(param+".file_id", "images by file_id are not supported (this server has no Files API): send image_url, a data URL or an http(s) URL")
		}
		u := p.MediaFields().ImageURL
		switch {
		case u == "":
			return BadRequest(param+".image_url", "input_image needs an image_url")
		case strings.HasPrefix(u, "data:"):
			if !strings.HasPrefix(u, "data:image/") || !strings.Contains(u, ";base64,") {
				return BadRequest(param+".image_url", "a data URL image must be data:image/<type>;base64,<data>")
			}
		case strings.HasPrefix(u, "https://"), strings.HasPrefix(u, "http://"):
		default:
			return BadRequest(param+".image_url", "image_url must be a data URL or an http(s) URL")
		}
	case PartInputFile:
		if p.MediaFields().FileID != "" {
			return Unsupported(param+".file_id", "files by file_id are not supported (this server has no Files API): send file_data")
		}
		if p.MediaFields().FileURL != "" {
			return Unsupported(param+".file_url", "files by file_url are not supported: send file_data")
		}
		if p.MediaFields().FileData == "" {
			return BadRequest(param+".file_data", "input_file needs file_data (a data URL or base64)")
		}
	}
	return nil
}
