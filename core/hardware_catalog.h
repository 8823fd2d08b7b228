// The hardware catalogue (data/hardware.json), embedded into the binary at build time so the
// tool needs no data files at run time.
#pragma once

#include <string_view>

namespace shardsim {

// The text of data/hardware.json as it was when the binary was built.
std::string_view HardwareCatalogText();

}  // namespace shardsim
