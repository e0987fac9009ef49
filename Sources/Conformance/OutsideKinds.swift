import HostSupport

/// The kinds of secrets and personal data the leak detectors teams already trust know, beyond
/// the nine of SPEC T-4 (SPEC T-5): gitleaks' default rules, detect-secrets' default plugins,
/// Nosey Parker's rules and Relay's PII rules. Each row makes a value by its issuer's
/// published format (`OutsideKind.Format`), with the text that stands around it when it is
/// written (`before` and `after`: a key that names it, a URL it sits in); only the value is
/// judged. Several rows may share a kind (GitHub's five token prefixes are one `github_token`).
package struct OutsideKind: Sendable {
    package var kind: String
    package var name: String
    package var before: String
    package var secret: String
    package var after: String
    package var source: String

    init(_ kind: String, _ name: String, _ before: String, _ secret: String, _ after: String, source: String) {
        (self.kind, self.name, self.before, self.secret, self.after, self.source) = (kind, name, before, secret, after, source)
    }

    package static let all: [OutsideKind] = [
        OutsideKind(#"private_key"#, #"private key (PEM, OpenSSH, PGP, PuTTY)"#, #""#, #"'-----BEGIN OPENSSH PRIVATE KEY-----\n' 70[A-Za-z0-9+/] '\n' 70[A-Za-z0-9+/] '\n' 20[A-Za-z0-9+/] '=\n-----END OPENSSH PRIVATE KEY-----'"#, #""#, source: "gitleaks:private-key; detect-secrets:PrivateKeyDetector"),
        OutsideKind(#"private_key"#, #"private key (PEM, OpenSSH, PGP, PuTTY)"#, #""#, #"'-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n' 64[A-Za-z0-9+/] '\n' 30[A-Za-z0-9+/] '\n=' 4[A-Za-z0-9+/] '\n-----END PGP PRIVATE KEY BLOCK-----'"#, #""#, source: "gitleaks:private-key; detect-secrets:PrivateKeyDetector"),
        OutsideKind(#"private_key"#, #"private key (PEM, OpenSSH, PGP, PuTTY)"#, #""#, #"'PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: k\nPublic-Lines: 1\n' 64[A-Za-z0-9+/] '\nPrivate-Lines: 2\n' 64[A-Za-z0-9+/] '\n' 40[A-Za-z0-9+/] '\nPrivate-MAC: ' 40[0-9a-f]"#, #""#, source: "detect-secrets:PrivateKeyDetector (PuTTY-User-Key-File-2)"),
        OutsideKind(#"private_key"#, #"private key (PEM, OpenSSH, PGP, PuTTY)"#, #""#, #"'-----BEGIN RSA PRIVATE KEY-----\n' 64[A-Za-z0-9+/] '\n' 64[A-Za-z0-9+/] '\n' 24[A-Za-z0-9+/] '==\n-----END RSA PRIVATE KEY-----'"#, #""#, source: "gitleaks:private-key; detect-secrets:PrivateKeyDetector; Relay:@pemkey"),
        OutsideKind(#"age_secret_key"#, #"age secret key"#, #""#, #"'AGE-SECRET-KEY-1' 58[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]"#, #""#, source: "gitleaks:age-secret-key"),
        OutsideKind(#"github_token"#, #"GitHub token"#, #""#, #"'ghp_' 36[A-Za-z0-9]"#, #""#, source: "gitleaks:github-pat; detect-secrets:GitHubTokenDetector"),
        OutsideKind(#"github_token"#, #"GitHub token"#, #""#, #"'github_pat_' 22[A-Za-z0-9] '_' 59[A-Za-z0-9]"#, #""#, source: "gitleaks:github-fine-grained-pat"),
        OutsideKind(#"github_token"#, #"GitHub token"#, #""#, #"'gho_' 36[A-Za-z0-9]"#, #""#, source: "gitleaks:github-oauth; detect-secrets:GitHubTokenDetector"),
        OutsideKind(#"github_token"#, #"GitHub token"#, #""#, #"('ghu_'|'ghs_') 36[A-Za-z0-9]"#, #""#, source: "gitleaks:github-app-token; detect-secrets:GitHubTokenDetector"),
        OutsideKind(#"github_token"#, #"GitHub token"#, #""#, #"'ghr_' 36[A-Za-z0-9]"#, #""#, source: "gitleaks:github-refresh-token; detect-secrets:GitHubTokenDetector"),
        OutsideKind(#"gitlab_token"#, #"GitLab token"#, #""#, #"'glpat-' 20[A-Za-z0-9_-]"#, #""#, source: "gitleaks:gitlab-pat, gitlab-pat-routable; detect-secrets:GitLabTokenDetector"),
        OutsideKind(#"gitlab_token"#, #"GitLab token"#, #""#, #"'glptt-' 40[0-9a-f]"#, #""#, source: "gitleaks:gitlab-ptt; detect-secrets:GitLabTokenDetector"),
        OutsideKind(#"gitlab_token"#, #"GitLab token"#, #""#, #"('glrt-'|'GR1348941') 20[A-Za-z0-9_-]"#, #""#, source: "gitleaks:gitlab-runner-authentication-token(-routable), gitlab-rrt; detect-secrets:GitLabTokenDetector"),
        OutsideKind(#"gitlab_token"#, #"GitLab token"#, #""#, #"('gldt-'|'glft-'|'glsoat-'|'gloas-') 20[A-Za-z0-9_-]"#, #""#, source: "gitleaks:gitlab-deploy-token, -feed-, -scim-, -feature-flag-client-, -incoming-mail-, -kubernetes-agent-, -oauth-app-secret, -cicd-job-token"),
        OutsideKind(#"slack_token"#, #"Slack token"#, #""#, #"'xoxb-' 12[0-9] '-' 13[0-9] '-' 24[A-Za-z0-9]"#, #""#, source: "gitleaks:slack-bot-token, slack-legacy-bot-token; detect-secrets:SlackDetector"),
        OutsideKind(#"slack_token"#, #"Slack token"#, #""#, #"'xoxp-' 12[0-9] '-' 12[0-9] '-' 13[0-9] '-' 32[a-f0-9]"#, #""#, source: "gitleaks:slack-user-token; detect-secrets:SlackDetector"),
        OutsideKind(#"slack_token"#, #"Slack token"#, #""#, #"'xapp-1-A' 10[A-Z0-9] '-' 13[0-9] '-' 64[a-f0-9]"#, #""#, source: "gitleaks:slack-app-token"),
        OutsideKind(#"slack_token"#, #"Slack token"#, #""#, #"'xoxe.xoxp-1-' 164[A-Z0-9]"#, #""#, source: "gitleaks:slack-legacy-token, slack-legacy-workspace-token, slack-config-access-token, slack-config-refresh-token; detect-secrets:SlackDetector"),
        OutsideKind(#"slack_webhook"#, #"Slack webhook URL"#, #""#, #"'https://hooks.slack.com/services/T' 10[A-Z0-9] '/B' 10[A-Z0-9] '/' 24[A-Za-z0-9]"#, #""#, source: "gitleaks:slack-webhook-url; detect-secrets:SlackDetector"),
        OutsideKind(#"discord_token"#, #"Discord bot token"#, #""#, #"'M' 25[A-Za-z0-9_-] '.' 6[A-Za-z0-9_-] '.' 27[A-Za-z0-9_-]"#, #""#, source: "detect-secrets:DiscordBotTokenDetector"),
        OutsideKind(#"discord_webhook"#, #"Discord webhook URL"#, #""#, #"'https://discord.com/api/webhooks/' 19[0-9] '/' 68[A-Za-z0-9_-]"#, #""#, source: "Nosey Parker:Discord Webhook (format)"),
        OutsideKind(#"telegram_bot_token"#, #"Telegram bot token"#, #""#, #"10[0-9] ':AA' 33[A-Za-z0-9_-]"#, #""#, source: "detect-secrets:TelegramBotTokenDetector (8-10 digits); gitleaks:telegram-bot-api-token (5-16 digits, without the telegr keyword)"),
        OutsideKind(#"stripe_key"#, #"Stripe secret key"#, #""#, #"('sk_live_'|'rk_live_'|'sk_test_') 24[A-Za-z0-9]"#, #""#, source: "gitleaks:stripe-access-token; detect-secrets:StripeDetector"),
        OutsideKind(#"stripe_key"#, #"Stripe secret key"#, #""#, #"'whsec_' 32[A-Za-z0-9]"#, #""#, source: "issuer format (Stripe webhook signing secret whsec_)"),
        OutsideKind(#"square_token"#, #"Square token"#, #""#, #"('EAAA'|'sq0atp-') 60[A-Za-z0-9_-]"#, #""#, source: "gitleaks:square-access-token"),
        OutsideKind(#"square_token"#, #"Square token"#, #""#, #"'sq0csp-' 43[A-Za-z0-9_-]"#, #""#, source: "detect-secrets:SquareOAuthDetector"),
        OutsideKind(#"aws_secret_key"#, #"AWS secret access key"#, #"'aws_secret_access_key = "'"#, #"40[A-Za-z0-9/+]"#, #"'"'"#, source: "detect-secrets:AWSKeyDetector (aws.{0,20}?key.{0,20}?'[0-9a-zA-Z/+]{40}')"),
        OutsideKind(#"azure_storage_key"#, #"Azure storage account key"#, #"'DefaultEndpointsProtocol=https;AccountName=acct;AccountKey='"#, #"86[A-Za-z0-9+/] '=='"#, #""#, source: "detect-secrets:AzureStorageKeyDetector"),
        OutsideKind(#"azure_client_secret"#, #"Azure AD client secret"#, #""#, #"3[A-Za-z0-9_~.] 1[0-9] 'Q~' 34[A-Za-z0-9_~.-]"#, #""#, source: "gitleaks:azure-ad-client-secret"),
        OutsideKind(#"azure_sas_token"#, #"Azure SAS signature"#, #"'https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sr=b&sig='"#, #"43[A-Za-z0-9] '%3D'"#, #""#, source: "Nosey Parker:Azure SAS token (sig= parameter)"),
        OutsideKind(#"google_api_key"#, #"Google API key"#, #""#, #"'AIza' 35[A-Za-z0-9_-]"#, #""#, source: "gitleaks:gcp-api-key"),
        OutsideKind(#"google_oauth"#, #"Google OAuth secret or token"#, #""#, #"'GOCSPX-' 28[A-Za-z0-9_-]"#, #""#, source: "Nosey Parker:Google OAuth Client Secret"),
        OutsideKind(#"google_oauth"#, #"Google OAuth secret or token"#, #""#, #"'ya29.' 120[A-Za-z0-9_-]"#, #""#, source: "Nosey Parker:Google OAuth Access Token"),
        OutsideKind(#"gcp_service_account"#, #"GCP service account key id"#, #"'{"type": "service_account", "private_key_id": "'"#, #"40[a-f0-9]"#, #"'"}'"#, source: "Nosey Parker:Google Cloud service account credentials (key id; its private_key is caught by private_key)"),
        OutsideKind(#"ibm_cloud_key"#, #"IBM Cloud key"#, #"'IBM_CLOUD_IAM_API_KEY = "'"#, #"44[A-Za-z0-9_-]"#, #"'"'"#, source: "detect-secrets:IbmCloudIamDetector"),
        OutsideKind(#"ibm_cloud_key"#, #"IBM Cloud key"#, #"'cos_hmac_secret_access_key: '"#, #"48[a-f0-9]"#, #""#, source: "detect-secrets:IbmCosHmacDetector"),
        OutsideKind(#"softlayer_api_key"#, #"SoftLayer API key"#, #"'SOFTLAYER_API_KEY='"#, #"64[a-z0-9]"#, #""#, source: "detect-secrets:SoftlayerDetector"),
        OutsideKind(#"cloudant_credentials"#, #"Cloudant password"#, #"'https://acct:'"#, #"64[0-9a-f]"#, #"'@acct.cloudant.com'"#, source: "detect-secrets:CloudantDetector"),
        OutsideKind(#"digitalocean_token"#, #"DigitalOcean token"#, #""#, #"('dop_v1_'|'doo_v1_'|'dor_v1_') 64[a-f0-9]"#, #""#, source: "gitleaks:digitalocean-pat, -access-token, -refresh-token"),
        OutsideKind(#"heroku_api_key"#, #"Heroku API key"#, #""#, #"'HRKU-AA' 58[A-Za-z0-9_-]"#, #""#, source: "gitleaks:heroku-api-key-v2"),
        OutsideKind(#"heroku_api_key"#, #"Heroku API key"#, #"'HEROKU_API_KEY: '"#, #"8[0-9a-f] '-' 4[0-9a-f] '-' 4[0-9a-f] '-' 4[0-9a-f] '-' 12[0-9a-f]"#, #""#, source: "gitleaks:heroku-api-key (keyword form)"),
        OutsideKind(#"databricks_token"#, #"Databricks token"#, #""#, #"'dapi' 32[a-f0-9]"#, #""#, source: "gitleaks:databricks-api-token"),
        OutsideKind(#"vault_token"#, #"HashiCorp Vault token"#, #""#, #"'hvs.' 95[A-Za-z0-9_-]"#, #""#, source: "gitleaks:vault-service-token, vault-batch-token"),
        OutsideKind(#"vault_token"#, #"HashiCorp Vault token"#, #""#, #"'s.' 24[A-Za-z0-9]"#, #""#, source: "gitleaks:vault-service-token (legacy s. form)"),
        OutsideKind(#"doppler_token"#, #"Doppler token"#, #""#, #"'dp.pt.' 43[A-Za-z0-9]"#, #""#, source: "gitleaks:doppler-api-token (all dp.* prefixes)"),
        OutsideKind(#"terraform_cloud_token"#, #"Terraform Cloud token"#, #""#, #"14[A-Za-z0-9] '.atlasv1.' 67[A-Za-z0-9_-]"#, #""#, source: "gitleaks:hashicorp-tf-api-token"),
        OutsideKind(#"grafana_token"#, #"Grafana token"#, #""#, #"'glsa_' 32[A-Za-z0-9] '_' 8[a-f0-9]"#, #""#, source: "gitleaks:grafana-service-account-token, grafana-cloud-api-token, grafana-api-key"),
        OutsideKind(#"new_relic_key"#, #"New Relic key"#, #""#, #"'NRAK-' 27[A-Z0-9]"#, #""#, source: "gitleaks:new-relic-user-api-key, -insert-key, -browser-api-token (without the keyword)"),
        OutsideKind(#"sentry_auth_token"#, #"Sentry auth token"#, #""#, #"'sntryu_' 64[a-f0-9]"#, #""#, source: "gitleaks:sentry-user-token, sentry-org-token"),
        OutsideKind(#"sentry_dsn"#, #"Sentry DSN key"#, #"'https://'"#, #"32[0-9a-f]"#, #"'@o' 6[0-9] '.ingest.sentry.io/' 7[0-9]"#, source: "issuer format (Sentry DSN; key part)"),
        OutsideKind(#"npm_token"#, #"npm token"#, #""#, #"'npm_' 36[A-Za-z0-9]"#, #""#, source: "gitleaks:npm-access-token"),
        OutsideKind(#"npm_token"#, #"npm token"#, #"'//registry.npmjs.org/:_authToken='"#, #"8[0-9a-f] '-' 4[0-9a-f] '-' 4[0-9a-f] '-' 4[0-9a-f] '-' 12[0-9a-f]"#, #""#, source: "detect-secrets:NpmDetector"),
        OutsideKind(#"pypi_token"#, #"PyPI upload token"#, #""#, #"'pypi-AgEIcHlwaS5vcmc' 70[A-Za-z0-9_-]"#, #""#, source: "gitleaks:pypi-upload-token; detect-secrets:PypiTokenDetector"),
        OutsideKind(#"rubygems_api_key"#, #"RubyGems API key"#, #""#, #"'rubygems_' 48[a-f0-9]"#, #""#, source: "gitleaks:rubygems-api-token"),
        OutsideKind(#"pulumi_access_token"#, #"Pulumi access token"#, #""#, #"'pul-' 40[a-f0-9]"#, #""#, source: "gitleaks:pulumi-api-token"),
        OutsideKind(#"artifactory_token"#, #"Artifactory token"#, #""#, #"'AKCp' 69[A-Za-z0-9]"#, #""#, source: "gitleaks:artifactory-api-key, artifactory-reference-token; detect-secrets:ArtifactoryDetector (AKC token part)"),
        OutsideKind(#"postman_api_key"#, #"Postman API key"#, #""#, #"'PMAK-' 24[a-f0-9] '-' 34[a-f0-9]"#, #""#, source: "gitleaks:postman-api-token"),
        OutsideKind(#"atlassian_api_token"#, #"Atlassian API token"#, #""#, #"'ATATT3' 186[A-Za-z0-9_-]"#, #""#, source: "gitleaks:atlassian-api-token (ATATT3)"),
        OutsideKind(#"atlassian_api_token"#, #"Atlassian API token"#, #"'JIRA_API_TOKEN="'"#, #"24[a-z0-9]"#, #"'"'"#, source: "gitleaks:atlassian-api-token (keyword form)"),
        OutsideKind(#"linear_api_key"#, #"Linear API key"#, #""#, #"'lin_api_' 40[A-Za-z0-9]"#, #""#, source: "gitleaks:linear-api-key"),
        OutsideKind(#"notion_token"#, #"Notion token"#, #""#, #"'ntn_' 11[0-9] 35[A-Za-z0-9]"#, #""#, source: "gitleaks:notion-api-token"),
        OutsideKind(#"dropbox_token"#, #"Dropbox token"#, #""#, #"'sl.' 138[A-Za-z0-9_-]"#, #""#, source: "gitleaks:dropbox-short-lived-api-token, dropbox-long-lived-api-token (without the keyword)"),
        OutsideKind(#"shopify_token"#, #"Shopify token"#, #""#, #"('shpat_'|'shpss_') 32[a-f0-9]"#, #""#, source: "gitleaks:shopify-access-token, -custom-access-token, -private-app-access-token, -shared-secret"),
        OutsideKind(#"sendgrid_api_key"#, #"SendGrid API key"#, #""#, #"'SG.' 22[A-Za-z0-9_-] '.' 43[A-Za-z0-9_-]"#, #""#, source: "gitleaks:sendgrid-api-token; detect-secrets:SendGridDetector"),
        OutsideKind(#"brevo_api_key"#, #"Brevo API key"#, #""#, #"'xkeysib-' 64[a-f0-9] '-' 16[A-Za-z0-9]"#, #""#, source: "gitleaks:sendinblue-api-token"),
        OutsideKind(#"mailchimp_api_key"#, #"Mailchimp API key"#, #""#, #"32[0-9a-f] '-us' 2[0-9]"#, #""#, source: "detect-secrets:MailchimpDetector; gitleaks:mailchimp-api-key (without the keyword)"),
        OutsideKind(#"twilio_key"#, #"Twilio key or account SID"#, #""#, #"'SK' 32[0-9a-f]"#, #""#, source: "gitleaks:twilio-api-key; detect-secrets:TwilioKeyDetector"),
        OutsideKind(#"twilio_key"#, #"Twilio key or account SID"#, #""#, #"'AC' 32[0-9a-f]"#, #""#, source: "detect-secrets:TwilioKeyDetector"),
        OutsideKind(#"anthropic_api_key"#, #"Anthropic API key"#, #""#, #"'sk-ant-api03-' 93[A-Za-z0-9_-] 'AA'"#, #""#, source: "gitleaks:anthropic-api-key, anthropic-admin-api-key"),
        OutsideKind(#"openai_api_key"#, #"OpenAI API key"#, #""#, #"('sk-proj-'|'sk-') 74[A-Za-z0-9_-] 'T3BlbkFJ' 74[A-Za-z0-9_-]"#, #""#, source: "gitleaks:openai-api-key; detect-secrets:OpenAIDetector"),
        OutsideKind(#"huggingface_token"#, #"Hugging Face token"#, #""#, #"'hf_' 34[A-Za-z]"#, #""#, source: "gitleaks:huggingface-access-token, huggingface-organization-api-token"),
        OutsideKind(#"perplexity_api_key"#, #"Perplexity API key"#, #""#, #"'pplx-' 48[A-Za-z0-9]"#, #""#, source: "gitleaks:perplexity-api-key"),
        OutsideKind(#"url_password"#, #"password in a URL"#, #"'postgres://app:'"#, #"16[A-Za-z0-9]"#, #"'@db.example.com:5432/x'"#, source: "detect-secrets:BasicAuthDetector; Relay:@urlauth"),
        OutsideKind(#"basic_auth"#, #"HTTP Basic credentials"#, #"'Authorization: Basic '"#, #"24[A-Za-z0-9+/] '=='"#, #""#, source: "issuer format (RFC 7617 Authorization: Basic)"),
        OutsideKind(#"imei"#, #"IMEI"#, #""#, #"'35' 6[0-9] '-' 6[0-9] '-' 1[0-9] ;luhn"#, #""#, source: "Relay:@imei"),
        OutsideKind(#"iban"#, #"IBAN"#, #""#, #"'DE00 ' 4[0-9] ' ' 4[0-9] ' ' 4[0-9] ' ' 4[0-9] ' ' 2[0-9] ;iban"#, #""#, source: "Relay:@iban (its country list moved to the check: 4x faster)"),
        OutsideKind(#"us_ssn"#, #"US social security number"#, #""#, #"'2' 2[0-9] '-' 1[1-9] 1[0-9] '-' 1[1-9] 3[0-9]"#, #""#, source: "Relay:@usssn (area/group/serial ranges added)"),
        OutsideKind(#"mac_address"#, #"MAC address"#, #""#, #"2[0-9a-f] ':' 2[0-9a-f] ':' 2[0-9a-f] ':' 2[0-9a-f] ':' 2[0-9a-f] ':' 2[0-9a-f]"#, #""#, source: "Relay:@mac"),
        OutsideKind(#"user_path"#, #"user name in a home path"#, #"('/home/'|'/Users/'|'C:\\Users\\')"#, #"1[a-z] 6[a-z0-9]"#, #"'/project/main.c'"#, source: "Relay:@userpath (PATH_REGEX)"),
    ]

    /// Every kind, in the table's order.
    package static let kinds: [String] = all.reduce(into: []) { kinds, row in if !kinds.contains(row.kind) { kinds.append(row.kind) } }

    /// The lines programs print a credential in (none names it with `key=`: a scrubber must
    /// know the value by its form).
    static let lines = ["request failed with {}", "retrying with credential {}", "cached {} for the session", "sent {} to the worker", "loaded {}"]

    /// One value of `kind` in a line a program prints, from `random`.
    static func item(_ kind: String, random: inout SplitMix64) -> PersonalData.Item {
        let rows = all.filter { $0.kind == kind }
        let row = rows[random.int(0..<rows.count)]
        let before = Format.make(row.before, random: &random)
        let secret = Format.make(row.secret, random: &random)
        let after = Format.make(row.after, random: &random)
        let parts = random.pick(lines).components(separatedBy: "{}")
        let text = parts[0] + before + secret + after + parts[1]
        return PersonalData.Item(kind: kind, name: row.name, text: text, secret: secret, secretStart: (parts[0] + before).utf8.count)
    }
}

/// The small language the rows' formats are written in: `'literal'` (with `\n`, `\t`, `\\`,
/// `\'`), `N[set]` or `N-M[set]` (that many characters of the set, ranges allowed), `('a'|'b')`
/// (one of the literals), then `;luhn` (the last digit made a Luhn check digit) or `;iban`
/// (characters 3 and 4 made the ISO 13616 check digits).
enum Format {
    static func make(_ format: String, random: inout SplitMix64) -> String {
        var out: [Character] = []
        var at = format.startIndex
        func literal() -> [Character] {
            var text: [Character] = []
            at = format.index(after: at)
            while at < format.endIndex, format[at] != "'" {
                if format[at] == "\\", format.index(after: at) < format.endIndex {
                    at = format.index(after: at)
                    text.append(format[at] == "n" ? "\n" : format[at] == "t" ? "\t" : format[at])
                } else {
                    text.append(format[at])
                }
                at = format.index(after: at)
            }
            if at < format.endIndex { at = format.index(after: at) }
            return text
        }
        while at < format.endIndex {
            let character = format[at]
            if character == " " {
                at = format.index(after: at)
            } else if character == "'" {
                out += literal()
            } else if character == "(" {
                var choices: [[Character]] = []
                at = format.index(after: at)
                while at < format.endIndex, format[at] != ")" {
                    if format[at] == "'" { choices.append(literal()) } else { at = format.index(after: at) }
                }
                if at < format.endIndex { at = format.index(after: at) }
                out += random.pick(choices)
            } else if character == ";" {
                let rest = format[format.index(after: at)...]
                out = rest.hasPrefix("luhn") ? luhn(out) : iban(out)
                at = format.index(at, offsetBy: 5)
            } else {
                out += repeated(format, at: &at, random: &random)
            }
        }
        return String(out)
    }

    /// `N[set]` or `N-M[set]` at `at`.
    private static func repeated(_ format: String, at: inout String.Index, random: inout SplitMix64) -> [Character] {
        func number() -> Int {
            var digits = ""
            while at < format.endIndex, format[at].isNumber {
                digits.append(format[at])
                at = format.index(after: at)
            }
            return Int(digits) ?? 0
        }
        let low = number()
        var high = low
        if at < format.endIndex, format[at] == "-" {
            at = format.index(after: at)
            high = number()
        }
        var set: [Character] = []
        at = format.index(after: at)  // [
        while at < format.endIndex, format[at] != "]" {
            var first = format[at]
            if first == "\\" {
                at = format.index(after: at)
                first = format[at]
            }
            let next = format.index(after: at)
            if next < format.endIndex, format[next] == "-", format.index(after: next) < format.endIndex, format[format.index(after: next)] != "]" {
                let last = format[format.index(after: next)]
                for scalar in first.unicodeScalars.first!.value...last.unicodeScalars.first!.value {
                    if let value = Unicode.Scalar(scalar) { set.append(Character(value)) }
                }
                at = format.index(next, offsetBy: 2)
            } else {
                set.append(first)
                at = next
            }
        }
        if at < format.endIndex { at = format.index(after: at) }
        let count = low + (high > low ? random.int(0..<(high - low + 1)) : 0)
        return (0..<count).map { _ in random.pick(set) }
    }

    /// The last digit made the Luhn check digit of the digits before it.
    static func luhn(_ text: [Character]) -> [Character] {
        let positions = text.indices.filter { text[$0].isNumber }
        guard let last = positions.last else { return text }
        let body = String(positions.dropLast().map { text[$0] })
        var result = text
        result[last] = Character(String(SplitMix64.luhnCheckDigit(body)))
        return result
    }

    /// Characters 3 and 4 made the IBAN's check digits (98 minus the rest mod 97).
    static func iban(_ text: [Character]) -> [Character] {
        let compact = text.filter { $0 != " " }
        guard compact.count > 4 else { return text }
        let moved = compact[4...] + compact[0..<2] + ["0", "0"]
        var rest = 0
        for character in moved {
            if let digit = character.wholeNumberValue, character.isASCII {
                rest = (rest * 10 + digit) % 97
            } else if let scalar = character.unicodeScalars.first, character.isUppercase {
                rest = (rest * 100 + Int(scalar.value) - 55) % 97
            }
        }
        let check = 98 - rest
        var result = text
        result[2] = Character(String(check / 10))
        result[3] = Character(String(check % 10))
        return result
    }
}
