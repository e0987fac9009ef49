/* scrub-pii's rules as data (SPEC T-4, T-5): one row a pattern, in the order that breaks ties
 * (an earlier row wins a match that starts at the same byte). Each row names its kind (what
 * `disable` names and the mask says), its pattern in Hyperscan's syntax, which part of a match
 * is replaced (`group`) and what must hold of it (`check`); engine.c reads both words. The
 * comment above a row names who publishes or detects the format. Several rows may share a
 * kind. The table was drawn from gitleaks' default rules, detect-secrets' plugins, Nosey
 * Parker's rules and Relay's PII rules, then tested against values made by each issuer's
 * published format. Patterns exclude NUL where they exclude one byte (`[^\x00-]`): Vectorscan
 * 5.4.9's AVX-512 path misses a run of a one-byte-excluding class followed by that byte at some
 * buffer alignments; text never holds NUL, so the rule means the same on either engine. */
#include "rules.h"

const struct scrub_rule scrub_rules[] = {
    /* private_key_openssh: gitleaks:private-key; detect-secrets:PrivateKeyDetector */
    {"private_key", "-----BEGIN OPENSSH PRIVATE KEY-----(?:[^\\x00-]|-[^\\x00-])+-----END OPENSSH PRIVATE KEY-----", "whole(first_end)", "none"},
    /* private_key_pgp: gitleaks:private-key; detect-secrets:PrivateKeyDetector */
    {"private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----(?:[^\\x00-]|-[^\\x00-])+-----END PGP PRIVATE KEY BLOCK-----", "whole(first_end)", "none"},
    /* private_key_putty: detect-secrets:PrivateKeyDetector (PuTTY-User-Key-File-2) */
    {"private_key", "PuTTY-User-Key-File-[23]:[^\\r\\n]*(?:\\r?\\n[^\\r\\n]*){1,12}?\\r?\\nPrivate-Lines: *[0-9]+(?:\\r?\\n[A-Za-z0-9+/=]+)+", "whole(longest)", "none"},
    /* private_key: gitleaks:private-key; detect-secrets:PrivateKeyDetector; Relay:@pemkey */
    {"private_key", "-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----(?:[^\\x00-]|-[^\\x00-])+-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----", "whole(first_end)", "none"},
    /* private_key (loose): gitleaks:private-key */
    {"private_key", "(?i)-----BEGIN[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----[^\\x00]+KEY(?: BLOCK)?-----", "whole(first_end)", "none"},
    /* age_secret_key: gitleaks:age-secret-key */
    {"age_secret_key", "AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", "whole", "none"},
    /* github_classic_pat: gitleaks:github-pat; detect-secrets:GitHubTokenDetector */
    {"github_token", "ghp_[A-Za-z0-9_]{36}", "whole", "none"},
    /* github_fine_grained_pat: gitleaks:github-fine-grained-pat */
    {"github_token", "github_pat_[A-Za-z0-9_]{82}", "whole", "none"},
    /* github_oauth_token: gitleaks:github-oauth; detect-secrets:GitHubTokenDetector */
    {"github_token", "gho_[A-Za-z0-9_]{36}", "whole", "none"},
    /* github_app_token: gitleaks:github-app-token; detect-secrets:GitHubTokenDetector */
    {"github_token", "gh[us]_[A-Za-z0-9_]{36}", "whole", "none"},
    /* github_refresh_token: gitleaks:github-refresh-token; detect-secrets:GitHubTokenDetector */
    {"github_token", "ghr_[A-Za-z0-9_]{36}", "whole", "none"},
    /* gitlab_pat: gitleaks:gitlab-pat, gitlab-pat-routable; detect-secrets:GitLabTokenDetector */
    {"gitlab_token", "glpat-[A-Za-z0-9_-]{20,}(?:\\.[0-9a-z]{9})?", "whole(longest)", "none"},
    /* gitlab_pipeline_trigger_token: gitleaks:gitlab-ptt; detect-secrets:GitLabTokenDetector */
    {"gitlab_token", "glptt-[A-Za-z0-9_-]{40}", "whole", "none"},
    /* gitlab_runner_token: gitleaks:gitlab-runner-authentication-token(-routable), gitlab-rrt; detect-secrets:GitLabTokenDetector */
    {"gitlab_token", "glrt-(?:t[0-9]_)?[A-Za-z0-9_-]{20,}(?:\\.[0-9a-z]{9})?|GR1348941[A-Za-z0-9_-]{20,}", "whole(longest)", "none"},
    /* gitlab_other_token: gitleaks:gitlab-deploy-token, -feed-, -scim-, -feature-flag-client-, -incoming-mail-, -kubernetes-agent-, -oauth-app-secret, -cicd-job-token */
    {"gitlab_token", "gl(?:dt|ft|soat|ffct|imt|agent|oas|cbt)-[A-Za-z0-9_-]{20,}", "whole(longest)", "none"},
    /* slack_bot_token: gitleaks:slack-bot-token, slack-legacy-bot-token; detect-secrets:SlackDetector */
    {"slack_token", "xoxb-[0-9]{8,14}-[A-Za-z0-9-]{10,}", "whole(longest)", "none"},
    /* slack_user_token: gitleaks:slack-user-token; detect-secrets:SlackDetector */
    {"slack_token", "xox[pe](?:-[0-9]{10,13}){3}-[A-Za-z0-9-]{28,}", "whole(longest)", "none"},
    /* slack_app_token: gitleaks:slack-app-token */
    {"slack_token", "(?i)xapp-[0-9]-[A-Z0-9]+-[0-9]+-[A-Z0-9]+", "whole(longest)", "none"},
    /* slack_other_token: gitleaks:slack-legacy-token, slack-legacy-workspace-token, slack-config-access-token, slack-config-refresh-token; detect-secrets:SlackDetector */
    {"slack_token", "xox(?:[aors]|e(?:\\.xox[bp])?)-[A-Za-z0-9-]{8,}", "whole(longest)", "none"},
    /* slack_token (any groups of digits): detect-secrets:SlackDetector */
    {"slack_token", "xox[abposr]-(?:[0-9]+-)+[A-Za-z0-9]+", "whole(longest)", "none"},
    /* slack_webhook_url: gitleaks:slack-webhook-url; detect-secrets:SlackDetector */
    {"slack_webhook", "hooks\\.slack\\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_]{20,}", "whole(longest)", "none"},
    /* discord_bot_token: detect-secrets:DiscordBotTokenDetector */
    {"discord_token", "\\b[MNO][A-Za-z0-9_-]{23,25}\\.[A-Za-z0-9_-]{6}\\.[A-Za-z0-9_-]{27,38}", "whole(longest)", "none"},
    /* discord_webhook_url: Nosey Parker:Discord Webhook (format) */
    {"discord_webhook", "discord(?:app)?\\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_-]{60,68}", "whole(longest)", "none"},
    /* telegram_bot_token: detect-secrets:TelegramBotTokenDetector (8-10 digits); gitleaks:telegram-bot-api-token (5-16 digits, without the telegr keyword) */
    {"telegram_bot_token", "\\b[0-9]{5,16}:[A-Za-z0-9_-]{35}", "whole", "none"},
    /* stripe_secret_key: gitleaks:stripe-access-token; detect-secrets:StripeDetector */
    {"stripe_key", "\\b[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,}", "whole(longest)", "none"},
    /* stripe_webhook_secret: issuer format (Stripe webhook signing secret whsec_) */
    {"stripe_key", "\\bwhsec_[A-Za-z0-9]{32,}", "whole(longest)", "none"},
    /* square_access_token: gitleaks:square-access-token */
    {"square_token", "\\b(?:EAAA|sq0atp-)[A-Za-z0-9_-]{22,60}", "whole(longest)", "none"},
    /* square_oauth_secret: detect-secrets:SquareOAuthDetector */
    {"square_token", "sq0csp-[A-Za-z0-9\\\\_-]{43}", "whole", "none"},
    /* aws_access_key_id: gitleaks:aws-access-token; detect-secrets:AWSKeyDetector */
    {"aws_key", "\\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\\b", "whole", "none"},
    /* aws_secret_access_key: detect-secrets:AWSKeyDetector (aws.{0,20}?key.{0,20}?'[0-9a-zA-Z/+]{40}') */
    {"aws_secret_key", "(?i)aws[_.-]?(?:secret[_.-]?(?:access[_.-]?)?key|secret|session[_.-]?token|key|pwd|pw|password|pass|token)['\"]?\\]?(?:[ \\t]*(?:=|:|:=|=>|::)[ \\t]*|[ \\t]+)['\"]?[A-Za-z0-9/+]{40}", "last:40", "none"},
    /* aws_secret_access_key (quoted): detect-secrets:AWSKeyDetector */
    {"aws_secret_key", "(?i)aws.{0,20}(?:key|pwd|pw|password|pass|token).{0,20}['\"][A-Za-z0-9/+]{40}", "last:40", "none"},
    /* azure_storage_account_key: detect-secrets:AzureStorageKeyDetector */
    {"azure_storage_key", "AccountKey=[A-Za-z0-9+/=]{88}", "first:11", "none"},
    /* azure_ad_client_secret: gitleaks:azure-ad-client-secret */
    {"azure_client_secret", "[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}", "whole(longest)", "none"},
    /* azure_sas_signature: Nosey Parker:Azure SAS token (sig= parameter) */
    {"azure_sas_token", "[?&]sig=[A-Za-z0-9%+/]{30,}(?:%3[Dd]|=){0,2}", "first:5", "none"},
    /* google_api_key: gitleaks:gcp-api-key */
    {"google_api_key", "AIza[A-Za-z0-9_-]{35}", "whole", "none"},
    /* google_oauth_client_secret: Nosey Parker:Google OAuth Client Secret */
    {"google_oauth", "GOCSPX-[A-Za-z0-9_-]{28}", "whole", "none"},
    /* google_oauth_access_token: Nosey Parker:Google OAuth Access Token */
    {"google_oauth", "\\bya29\\.[A-Za-z0-9_-]{20,}", "whole(longest)", "none"},
    /* gcp_service_account_key_id: Nosey Parker:Google Cloud service account credentials (key id; its private_key is caught by private_key) */
    {"gcp_service_account", "\\\"private_key_id\\\"[ \\t]*:[ \\t]*\\\"[a-f0-9]{40}", "last:40", "none"},
    /* ibm_cloud_iam_key: detect-secrets:IbmCloudIamDetector */
    {"ibm_cloud_key", "(?i)(?:ibm|iam|cloud)?[_-]?(?:cloud)?[_-]?(?:iam)?[_-]?(?:api)?[_-]?(?:key|pwd|password|pass|token)['\"]?\\]?(?:[ \\t]*(?:=|:|:=|=>|::)[ \\t]*|[ \\t]+)['\"]?[A-Za-z0-9_-]{44}", "last:44", "none"},
    /* ibm_cos_hmac_secret: detect-secrets:IbmCosHmacDetector */
    {"ibm_cloud_key", "(?i)(?:ibm)?[_-]?cos[_-]?(?:hmac)?[_-]?secret[_-]?(?:access)?[_-]?key['\"]?\\]?(?:[ \\t]*(?:=|:|:=|=>|::)[ \\t]*|[ \\t]+)['\"]?[a-f0-9]{48}", "last:48", "none"},
    /* softlayer_api_key: detect-secrets:SoftlayerDetector */
    {"softlayer_api_key", "(?i)(?:(?:softlayer|sl)[_-]?(?:api)?[_-]?(?:key|pwd|password|pass|token)['\"]?\\]?(?:[ \\t]*(?:=|:|:=|=>|::)[ \\t]*|[ \\t]+)['\"]?|api\\.softlayer\\.com/soap/v3(?:\\.1)?/)[a-z0-9]{64}", "last:64", "none"},
    /* cloudant_credentials: detect-secrets:CloudantDetector */
    {"cloudant_credentials", "(?i)https?://[A-Za-z0-9_-]+:(?:[0-9a-f]{64}|[a-z]{24})@[A-Za-z0-9_-]+\\.cloudant\\.com", "url_password", "none"},
    /* cloudant_credentials (keyword): detect-secrets:CloudantDetector */
    {"cloudant_credentials", "(?i)(?:cloudant|clou|cl)[_-]?(?:api)?(?:key|pwd|pw|password|pass|token)['\"]?\\]?(?:[ \\t]*(?:=|:|:=|=>|::)[ \\t]*|[ \\t]+)['\"]?[0-9a-f]{64}", "last:64", "none"},
    {"cloudant_credentials", "(?i)(?:cloudant|clou|cl)[_-]?(?:api)?(?:key|pwd|pw|password|pass|token)['\"]?\\]?(?:[ \\t]*(?:=|:|:=|=>|::)[ \\t]*|[ \\t]+)['\"]?[a-z]{24}", "last:24", "none"},
    /* digitalocean_token: gitleaks:digitalocean-pat, -access-token, -refresh-token */
    {"digitalocean_token", "do[opr]_v1_[a-f0-9]{64}", "whole", "none"},
    /* heroku_api_key: gitleaks:heroku-api-key-v2, heroku-api-key */
    {"heroku_api_key", "\\bHRKU-AA[A-Za-z0-9_-]{58}", "whole", "none"},
    {"heroku_api_key", "(?i)heroku[ \\t\\w.-]{0,20}[\\s'\"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[`'\"\\s=]{0,5}[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "last:36", "none"},
    /* databricks_token: gitleaks:databricks-api-token */
    {"databricks_token", "\\bdapi[a-f0-9]{32}(?:-[0-9])?", "whole(longest)", "none"},
    /* vault_token: gitleaks:vault-service-token, vault-batch-token */
    {"vault_token", "\\bhv[sb]\\.[A-Za-z0-9_-]{90,}", "whole(longest)", "none"},
    /* vault_legacy_token: gitleaks:vault-service-token (s. and 24) */
    {"vault_token", "\\bs\\.[A-Za-z0-9]{24}\\b", "whole", "none"},
    /* doppler_token: gitleaks:doppler-api-token (all dp.* prefixes) */
    {"doppler_token", "dp\\.(?:pt|st|sa|ct|scim|audit)\\.[A-Za-z0-9_.-]{40,}", "whole(longest)", "none"},
    /* terraform_cloud_token: gitleaks:hashicorp-tf-api-token */
    {"terraform_cloud_token", "[A-Za-z0-9]{14}\\.atlasv1\\.[A-Za-z0-9_=-]{60,70}", "whole(longest)", "none"},
    /* grafana_token: gitleaks:grafana-service-account-token, grafana-cloud-api-token, grafana-api-key */
    {"grafana_token", "\\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|\\bglc_[A-Za-z0-9+/]{32,}={0,2}|\\beyJrIjoi[A-Za-z0-9]{70,}={0,2}", "whole(longest)", "none"},
    /* new_relic_key: gitleaks:new-relic-user-api-key, -insert-key, -browser-api-token (without the keyword) */
    {"new_relic_key", "NRAK-[A-Za-z0-9]{27}|NRII-[A-Za-z0-9-]{32}|NRJS-[a-f0-9]{19}", "whole", "none"},
    /* sentry_auth_token: gitleaks:sentry-user-token, sentry-org-token */
    {"sentry_auth_token", "\\bsntryu_[a-f0-9]{64}|\\bsntrys_eyJ[A-Za-z0-9+/=]{40,}_[A-Za-z0-9+/]{43}", "whole(longest)", "none"},
    /* sentry_dsn: issuer format (Sentry DSN; key part) */
    {"sentry_dsn", "(?i)https?://[0-9a-f]{32}(?::[0-9a-f]{32})?@[A-Za-z0-9.-]+(?::[0-9]+)?/[0-9]+", "url_userinfo", "none"},
    /* npm_access_token: gitleaks:npm-access-token */
    {"npm_token", "\\bnpm_[A-Za-z0-9]{36}", "whole", "none"},
    /* npmrc_auth_token: detect-secrets:NpmDetector */
    {"npm_token", ":_auth(?:Token)?[ \\t]*=[ \\t]*[^\\s'\\\"]+", "after_first:=", "none"},
    /* pypi_upload_token: gitleaks:pypi-upload-token; detect-secrets:PypiTokenDetector */
    {"pypi_token", "pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}", "whole(longest)", "none"},
    /* rubygems_api_key: gitleaks:rubygems-api-token */
    {"rubygems_api_key", "\\brubygems_[a-f0-9]{48}", "whole", "none"},
    /* pulumi_access_token: gitleaks:pulumi-api-token */
    {"pulumi_access_token", "\\bpul-[a-f0-9]{40}", "whole", "none"},
    /* artifactory_token: gitleaks:artifactory-api-key, artifactory-reference-token; detect-secrets:ArtifactoryDetector (AKC token part) */
    {"artifactory_token", "\\bAKCp[A-Za-z0-9]{69}|\\bcmVmd[A-Za-z0-9]{59}", "whole", "none"},
    /* postman_api_key: gitleaks:postman-api-token */
    {"postman_api_key", "PMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}", "whole", "none"},
    /* atlassian_api_token: gitleaks:atlassian-api-token (ATATT3) */
    {"atlassian_api_token", "ATATT3[A-Za-z0-9_=-]{186}", "whole", "none"},
    /* atlassian_api_token (keyword): gitleaks:atlassian-api-token */
    {"atlassian_api_token", "(?i)(?:atlassian|confluence|jira)[ \\t\\w.-]{0,20}[\\s'\"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[`'\"\\s=]{0,5}[a-z0-9]{24}", "last:24", "none"},
    /* linear_api_key: gitleaks:linear-api-key */
    {"linear_api_key", "lin_api_[A-Za-z0-9]{40}", "whole", "none"},
    /* notion_token: gitleaks:notion-api-token */
    {"notion_token", "\\bntn_[0-9]{11}[A-Za-z0-9]{35}", "whole", "none"},
    /* dropbox_token: gitleaks:dropbox-short-lived-api-token, dropbox-long-lived-api-token (without the keyword) */
    {"dropbox_token", "\\bsl\\.(?:[A-Za-z]\\.)?[A-Za-z0-9_=-]{130,}|\\b[A-Za-z0-9]{11}AAAAAAAAAA[A-Za-z0-9_=-]{43}", "whole(longest)", "none"},
    /* shopify_token: gitleaks:shopify-access-token, -custom-access-token, -private-app-access-token, -shared-secret */
    {"shopify_token", "shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", "whole", "none"},
    /* sendgrid_api_key: gitleaks:sendgrid-api-token; detect-secrets:SendGridDetector */
    {"sendgrid_api_key", "SG\\.[A-Za-z0-9_-]{22}\\.[A-Za-z0-9_-]{43}|SG\\.[A-Za-z0-9=_.-]{66}", "whole(longest)", "none"},
    /* brevo_api_key: gitleaks:sendinblue-api-token */
    {"brevo_api_key", "\\bxkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", "whole", "none"},
    /* mailchimp_api_key: detect-secrets:MailchimpDetector; gitleaks:mailchimp-api-key (without the keyword) */
    {"mailchimp_api_key", "\\b[0-9A-Za-z]{32}-us[0-9]{1,2}\\b", "whole", "none"},
    /* twilio_api_key: gitleaks:twilio-api-key; detect-secrets:TwilioKeyDetector */
    {"twilio_key", "\\bSK(?:[0-9a-fA-F]{32}|[0-9a-z]{32})\\b", "whole", "none"},
    /* twilio_account_sid: detect-secrets:TwilioKeyDetector */
    {"twilio_key", "\\bAC[0-9a-z]{32}\\b", "whole", "none"},
    /* anthropic_api_key: gitleaks:anthropic-api-key, anthropic-admin-api-key */
    {"anthropic_api_key", "sk-ant-(?:api|admin|oat|sid)[0-9]{2}-[A-Za-z0-9_-]{80,}", "whole(longest)", "none"},
    /* openai_api_key: gitleaks:openai-api-key; detect-secrets:OpenAIDetector */
    {"openai_api_key", "sk-[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}", "whole(longest)", "none"},
    /* huggingface_token: gitleaks:huggingface-access-token, huggingface-organization-api-token */
    {"huggingface_token", "\\b(?:hf_|api_org_)[A-Za-z]{34}\\b", "whole", "none"},
    /* perplexity_api_key: gitleaks:perplexity-api-key */
    {"perplexity_api_key", "\\bpplx-[A-Za-z0-9]{48}", "whole", "none"},
    /* jwt: gitleaks:jwt; detect-secrets:JwtTokenDetector */
    {"jwt", "\\beyJ[A-Za-z0-9_-]{5,}\\.eyJ[A-Za-z0-9_-]{5,}\\.[A-Za-z0-9_=-]*", "whole(longest)", "none"},
    /* url_password: detect-secrets:BasicAuthDetector; Relay:@urlauth */
    {"url_password", "\\b[A-Za-z][A-Za-z0-9+.-]{1,15}://[^\\s:/?#\\[\\]@]+:[^\\s:/?#\\[\\]@]+@", "url_password", "none"},
    /* basic_auth_header: issuer format (RFC 7617 Authorization: Basic) */
    {"basic_auth", "(?i)authorization['\\\"]?[ \\t]*[:=][ \\t]*['\\\"]?basic[ \\t]+[A-Za-z0-9+/]+={0,2}", "after_last:space", "none"},
    /* bearer_token: Relay:@bearer (BEARER_TOKEN_REGEX) */
    {"bearer", "(?i)\\bbearer[ \\t]+(?:[A-Za-z0-9._~+/-]*[0-9._~+/-][A-Za-z0-9._~+/-]*|[A-Za-z0-9._~+/-]{8,})=*", "after_last:space", "none"},
    /* secret_assignment: scrub-pii secret (key=value); Relay:@password (PASSWORD_KEY_REGEX); detect-secrets:KeywordDetector */
    {"secret", "(?:^|[^A-Za-z0-9])(?i:password|passwd|pwd|passphrase|secrets?|token|key|auth|credentials?)['\\\"]?[ \\t]*(?:=|:[ \\t]*)['\\\"]?[^\\s'\\\"&,;()\\[\\]{}<>][^\\s'\\\"&,;]*|[a-z0-9](?:Password|Passwd|Pwd|Passphrase|Secrets?|Token|Key|Auth|Credentials?|PASSWORD|SECRET|TOKEN|KEY)['\\\"]?[ \\t]*(?:=|:[ \\t]*)['\\\"]?[^\\s'\\\"&,;()\\[\\]{}<>][^\\s'\\\"&,;]*", "assign_value", "none"},
    /* email: Relay:@email; scrub-pii email */
    {"email", "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}", "whole(longest)", "none"},
    /* imei: Relay:@imei */
    {"imei", "\\b[0-9]{2}-?[0-9]{6}-?[0-9]{6}-?[0-9]\\b", "whole(longest)", "luhn15; not_prefix:34,37; not_in_identifier"},
    /* credit_card: Relay:@creditcard; scrub-pii card */
    {"card", "\\b(?:4[0-9]|5[0-9]|2[2-7]|3[0-9]|6[0-9]|06)[0-9]{2}(?:[ -]?[0-9]){8,15}\\b", "whole(longest)", "luhn; card_issuer; not_in_identifier"},
    /* iban: Relay:@iban (its country list moved to the check: 4x faster) */
    {"iban", "\\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}\\b", "whole(longest)", "iban_mod97"},
    /* us_ssn: Relay:@usssn (area/group/serial ranges added) */
    {"us_ssn", "\\b(?:00[1-9]|0[1-9][0-9]|[1-578][0-9]{2}|6[0-57-9][0-9]|66[0-57-9])-(?:0[1-9]|[1-9][0-9])-(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})\\b", "whole", "none"},
    /* mac_address: Relay:@mac */
    {"mac_address", "\\b[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}\\b", "whole", "none"},
    /* ipv4: Relay:@ip; scrub-pii ipv4 */
    {"ipv4", "\\b(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}\\b", "whole(longest)", "not_after:version,ver,v,build,release,id; no_dotted_run"},
    /* ipv6: Relay:@ip; scrub-pii ipv6 */
    {"ipv6", "(?i)(?:[0-9a-f]{1,4}:){7}[0-9a-f]{1,4}|(?:[0-9a-f]{1,4}:){1,7}:|(?:[0-9a-f]{1,4}:){1,6}:[0-9a-f]{1,4}|(?:[0-9a-f]{1,4}:){1,5}(?::[0-9a-f]{1,4}){1,2}|(?:[0-9a-f]{1,4}:){1,4}(?::[0-9a-f]{1,4}){1,3}|(?:[0-9a-f]{1,4}:){1,3}(?::[0-9a-f]{1,4}){1,4}|(?:[0-9a-f]{1,4}:){1,2}(?::[0-9a-f]{1,4}){1,5}|[0-9a-f]{1,4}:(?::[0-9a-f]{1,4}){1,6}|:(?::[0-9a-f]{1,4}){1,7}|fe80:(?::[0-9a-f]{0,4}){0,4}%[0-9a-z]+|::(?:ffff(?::0{1,4})?:)?(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}|(?:[0-9a-f]{1,4}:){1,4}:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}", "whole(longest)", "ipv6_groups>=3"},
    /* phone: scrub-pii phone */
    {"phone", "\\+[1-9](?:[ .-]?[0-9]){7,14}|\\b00[1-9][0-9]{0,3}(?:[ .-][0-9]{2,4}){2,5}|\\([2-9][0-9]{2}\\)[ .-]?[2-9][0-9]{2}[ .-][0-9]{4}|\\b[2-9][0-9]{2}[.-][2-9][0-9]{2}[.-][0-9]{4}|\\b[2-9][0-9]{2}[2-9][0-9]{6}\\b", "whole(longest)", "not_after:id,build,version,order,ord,ref,invoice,ticket,pid,tid,item; not_unix_time; no_alnum_before; not_in_identifier"},
    /* user_path: Relay:@userpath (PATH_REGEX) */
    {"user_path", "(?i)(?:^|[^A-Za-z0-9._-])(?:/home/|/users/)[^/\\\\\\s\\\"'<>:*?|]+|\\b[a-z]:(?:\\\\{1,2}|/)(?:users|documents and settings)(?:\\\\{1,2}|/)[^/\\\\\\s\\\"'<>:*?|]+", "after_last:/\\", "none"},
};

const size_t scrub_rule_count = sizeof scrub_rules / sizeof *scrub_rules;
