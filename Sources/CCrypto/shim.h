#pragma once
/* Only the EVP digest interface of Debian's libcrypto (libssl-dev): SHA-256 of reports'
   attachments and of plugin files. */
#include <openssl/evp.h>
