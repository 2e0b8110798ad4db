// Images and languages: which images a sandbox can start from
// (list_images), and which languages a sandbox on an image runs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/result.h"
#include "service/env.h"
#include "service/languages.h"

namespace sandcastle::service {

// The language `name` as a sandbox on `image` runs it: for "host", one whose
// toolchain the host has (find_language); for a store image, one the image
// has, else kInvalidArgument ("image X has no python3: pick an image with
// python, or image 'host'"). A missing image is kNotFound.
Result<const Language*> language_for_image(const Env& env, std::string_view name,
                                           const std::string& image);
// The canonical name of a language or alias ("py" -> "python"), whether or
// not the host has it; unknown names are returned as they are.
std::string canonical_language(std::string_view name);
// The image a create of `language` gets when it names none.
std::string default_image_for(const Config& config, const std::string& language);

// list_images: {images: [{name, id, tags, languages, size_bytes, created,
// source}], count}, "host" first.
Result<nlohmann::json> list_images(const Env& env);

}  // namespace sandcastle::service
