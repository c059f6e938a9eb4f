printf '{"verdict":"stop","reason":"The form has no title line."}'; exit 11
